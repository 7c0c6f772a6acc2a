/// Why the bridge remembers an event id across restarts (``BridgeRouter/Action/remember(_:_:)``): it published
/// the event, or it broadcast it on the mesh. The raw value is the durable store's column value.
public enum RememberedRole: Int64, Sendable {
    case published = 1
    case rebroadcast = 2
}
