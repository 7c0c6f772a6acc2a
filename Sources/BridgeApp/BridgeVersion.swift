/// The release, for `--version` and the relays' User-Agent.
public enum BridgeVersion {
    public static let string = "0.1.0"
}
