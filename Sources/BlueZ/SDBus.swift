import CSystemd
#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus error reply (name as BlueZ and dbus-daemon send it) or a local failure with an errno.
public struct DBusError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    init(errno code: Int32, _ context: String) {
        name = "errno.\(code)"
        message = "\(context): \(String(cString: strerror(code)))"
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }

    public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let noReply = "org.freedesktop.DBus.Error.NoReply"
    public static let timedOut = "org.freedesktop.DBus.Error.Timeout"
}

/// One interface of one exported object: its properties (served by sd-bus's Properties implementation
/// from the vtable) and its methods (dispatched to `handler`). Lives as long as it is exported.
final class ExportedInterface {
    typealias Handler = (_ member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], DBusError>

    let path: String
    let name: String
    private(set) var properties: [(name: String, value: DBusValue)]
    let handler: Handler
    fileprivate var slot: OpaquePointer?
    fileprivate var vtable: UnsafeMutablePointer<sd_bus_vtable>?
    fileprivate var strings: [UnsafeMutablePointer<CChar>] = []

    init(path: String, name: String, properties: [(name: String, value: DBusValue)], handler: @escaping Handler) {
        self.path = path
        self.name = name
        self.properties = properties
        self.handler = handler
    }

    func value(of property: String) -> DBusValue? { properties.first { $0.name == property }?.value }

    func set(_ property: String, _ value: DBusValue) {
        if let index = properties.firstIndex(where: { $0.name == property }) { properties[index].value = value }
    }

    fileprivate func cString(_ text: String) -> UnsafePointer<CChar> {
        let pointer = strdup(text)!
        strings.append(pointer)
        return UnsafePointer(pointer)
    }

    deinit {
        if let slot { sd_bus_slot_unref(slot) }
        vtable?.deallocate()
        for pointer in strings { free(pointer) }
    }
}

/// An sd-bus connection confined to one thread (sd-bus objects are not thread-safe, SWIFT-LINUX §7).
///
/// Everything here is called on the owner thread only; ``BlueZTransport`` enforces that. Variadic sd-bus
/// calls are avoided (Swift cannot call them): values go through `append_basic`/`open_container`.
final class SDBusConnection {
    let bus: OpaquePointer
    private var signalBoxes: [Int: (slot: OpaquePointer?, box: SignalBox)] = [:]
    private var nextSignalID = 0
    private var objectManagerSlots: [OpaquePointer] = []

    final class SignalBox {
        let handler: (_ path: String, _ member: String, _ arguments: [DBusValue]) -> Void
        init(_ handler: @escaping (_ path: String, _ member: String, _ arguments: [DBusValue]) -> Void) { self.handler = handler }
    }

    final class ReplyBox {
        let completion: (Result<[DBusValue], DBusError>) -> Void
        init(_ completion: @escaping (Result<[DBusValue], DBusError>) -> Void) { self.completion = completion }
    }

    /// Opens the system bus (honours `DBUS_SYSTEM_BUS_ADDRESS`, which the tests use for a private bus).
    static func openSystem() throws(DBusError) -> SDBusConnection {
        var bus: OpaquePointer?
        let result = sd_bus_open_system(&bus)
        guard result >= 0, let bus else { throw DBusError(errno: -result, "cannot connect to the D-Bus system bus") }
        return SDBusConnection(bus: bus)
    }

    private init(bus: OpaquePointer) { self.bus = bus }

    deinit {
        for entry in signalBoxes.values { if let slot = entry.slot { sd_bus_slot_unref(slot) } }
        for slot in objectManagerSlots { sd_bus_slot_unref(slot) }
        sd_bus_flush_close_unref(bus)
    }

    var uniqueName: String? {
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(bus, &name) >= 0, let name else { return nil }
        return String(cString: name)
    }

    // MARK: Loop support

    /// Processes every queued message (callbacks run here). Returns false when the connection is gone.
    func processAll() -> Bool {
        while true {
            let result = sd_bus_process(bus, nil)
            if result < 0 { return false }
            if result == 0 { return true }
        }
    }

    var fd: Int32 { sd_bus_get_fd(bus) }
    var pollEvents: Int16 {
        let events = sd_bus_get_events(bus)
        return events < 0 ? Int16(POLLIN) : Int16(truncatingIfNeeded: events)
    }
    /// µs until sd-bus needs processing for its own timeouts (nil: none pending).
    var timeoutUsec: UInt64? {
        var usec: UInt64 = 0
        guard sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max else { return nil }
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        let now = UInt64(spec.tv_sec) * 1_000_000 + UInt64(spec.tv_nsec) / 1_000
        return usec > now ? usec - now : 0
    }

    func flush() { _ = sd_bus_flush(bus) }

    // MARK: Calls

    private func newCall(_ destination: String, _ path: String, _ interface: String, _ member: String,
                         _ arguments: [DBusValue]) throws(DBusError) -> OpaquePointer {
        var message: OpaquePointer?
        let result = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        guard result >= 0, let message else { throw DBusError(errno: -result, "\(interface).\(member)") }
        for argument in arguments {
            let appended = Self.append(argument, to: message)
            guard appended >= 0 else {
                sd_bus_message_unref(message)
                throw DBusError(errno: -appended, "\(interface).\(member) arguments")
            }
        }
        return message
    }

    /// A blocking call: only toward services that never call back into us (SWIFT-LINUX §7's deadlock).
    func call(_ destination: String, _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
              timeoutMs: UInt64 = 5_000) throws(DBusError) -> [DBusValue] {
        let message = try newCall(destination, path, interface, member, arguments)
        defer { sd_bus_message_unref(message) }
        var error = sd_bus_error()
        var reply: OpaquePointer?
        let result = sd_bus_call(bus, message, timeoutMs * 1_000, &error, &reply)
        defer { sd_bus_error_free(&error) }
        guard result >= 0, let reply else {
            if let name = error.name {
                throw DBusError(name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "")
            }
            throw DBusError(errno: -result, "\(interface).\(member)")
        }
        defer { sd_bus_message_unref(reply) }
        return Self.readAll(reply)
    }

    /// An asynchronous call; `completion` runs on the owner thread during ``processAll()``.
    func callAsync(_ destination: String, _ path: String, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
                   timeoutMs: UInt64 = 25_000, completion: @escaping (Result<[DBusValue], DBusError>) -> Void) {
        let message: OpaquePointer
        do {
            message = try newCall(destination, path, interface, member, arguments)
        } catch {
            completion(.failure(error))
            return
        }
        defer { sd_bus_message_unref(message) }
        let box = Unmanaged.passRetained(ReplyBox(completion)).toOpaque()
        let result = sd_bus_call_async(bus, nil, message, { reply, userdata, _ in
            guard let userdata else { return 0 }
            let box = Unmanaged<ReplyBox>.fromOpaque(userdata).takeRetainedValue()
            guard let reply else {
                box.completion(.failure(DBusError(name: DBusError.noReply, message: "")))
                return 0
            }
            if let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
                let name = error.pointee.name.map { String(cString: $0) } ?? "unknown"
                let text = error.pointee.message.map { String(cString: $0) } ?? ""
                box.completion(.failure(DBusError(name: name, message: text)))
            } else {
                box.completion(.success(SDBusConnection.readAll(reply)))
            }
            return 0
        }, box, timeoutMs * 1_000)
        if result < 0 {
            Unmanaged<ReplyBox>.fromOpaque(box).release()
            completion(.failure(DBusError(errno: -result, "\(interface).\(member)")))
        }
    }

    /// Subscribes to a signal; nil fields match anything. Returns an id for ``removeMatch(_:)``.
    @discardableResult
    func matchSignal(sender: String?, path: String?, interface: String?, member: String?,
                     handler: @escaping (_ path: String, _ member: String, _ arguments: [DBusValue]) -> Void) throws(DBusError) -> Int {
        let box = SignalBox(handler)
        var slot: OpaquePointer?
        let result = sd_bus_match_signal(bus, &slot, sender, path, interface, member, { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let box = Unmanaged<SignalBox>.fromOpaque(userdata).takeUnretainedValue()
            let path = sd_bus_message_get_path(message).map { String(cString: $0) } ?? ""
            let member = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
            box.handler(path, member, SDBusConnection.readAll(message))
            return 0
        }, Unmanaged.passUnretained(box).toOpaque())
        guard result >= 0 else { throw DBusError(errno: -result, "match \(member ?? "*")") }
        nextSignalID += 1
        signalBoxes[nextSignalID] = (slot, box)
        return nextSignalID
    }

    // MARK: Export

    func addObjectManager(at path: String) throws(DBusError) {
        var slot: OpaquePointer?
        let result = sd_bus_add_object_manager(bus, &slot, path)
        guard result >= 0, let slot else { throw DBusError(errno: -result, "object manager at \(path)") }
        objectManagerSlots.append(slot)
    }

    /// Exports `interface` (its vtable lists every property; `emitting` ones may send PropertiesChanged).
    func export(_ interface: ExportedInterface, methods: [(name: String, input: String, output: String)],
                emitting: Set<String>) throws(DBusError) {
        var entries: [sd_bus_vtable] = [CSystemd_vtableStart(0)]
        for method in methods {
            entries.append(CSystemd_vtableMethod(
                interface.cString(method.name), interface.cString(method.input), interface.cString(method.output),
                exportedMethodHandler, CSystemd_flagUnprivileged()))
        }
        for property in interface.properties {
            let flags = emitting.contains(property.name) ? CSystemd_flagEmitsChange() : 0
            entries.append(CSystemd_vtableProperty(
                interface.cString(property.name), interface.cString(property.value.signature), exportedPropertyGetter, nil, flags))
        }
        entries.append(CSystemd_vtableEnd())
        let table = UnsafeMutablePointer<sd_bus_vtable>.allocate(capacity: entries.count)
        table.initialize(from: entries, count: entries.count)
        interface.vtable = table
        var slot: OpaquePointer?
        let result = sd_bus_add_object_vtable(
            bus, &slot, interface.cString(interface.path), interface.cString(interface.name), table,
            Unmanaged.passUnretained(interface).toOpaque())
        guard result >= 0 else { throw DBusError(errno: -result, "export \(interface.path) \(interface.name)") }
        interface.slot = slot
    }

    func emitPropertiesChanged(_ interface: ExportedInterface, _ names: [String]) {
        var pointers: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        pointers.withUnsafeMutableBufferPointer { buffer in
            _ = sd_bus_emit_properties_changed_strv(bus, interface.path, interface.name, buffer.baseAddress)
        }
    }

    // MARK: Message values

    /// Reads every remaining value of `message` (stops quietly at the first malformed one).
    static func readAll(_ message: OpaquePointer) -> [DBusValue] {
        var values: [DBusValue] = []
        while let value = read(message) { values.append(value) }
        return values
    }

    /// Reads the next value; nil at the end of the current container or on error.
    static func read(_ message: OpaquePointer) -> DBusValue? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard sd_bus_message_peek_type(message, &type, &contents) > 0 else { return nil }
        let contentSignature = contents.map { String(cString: $0) } ?? ""
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "y"): return readBasic(message, type, UInt8(0)).map { .byte($0) }
        case UInt8(ascii: "b"): return readBasic(message, type, Int32(0)).map { .bool($0 != 0) }
        case UInt8(ascii: "n"): return readBasic(message, type, Int16(0)).map { .int16($0) }
        case UInt8(ascii: "q"): return readBasic(message, type, UInt16(0)).map { .uint16($0) }
        case UInt8(ascii: "i"): return readBasic(message, type, Int32(0)).map { .int32($0) }
        case UInt8(ascii: "u"): return readBasic(message, type, UInt32(0)).map { .uint32($0) }
        case UInt8(ascii: "h"): return readBasic(message, type, Int32(0)).map { .int32($0) }
        case UInt8(ascii: "x"): return readBasic(message, type, Int64(0)).map { .int64($0) }
        case UInt8(ascii: "t"): return readBasic(message, type, UInt64(0)).map { .uint64($0) }
        case UInt8(ascii: "d"): return readBasic(message, type, Double(0)).map { .double($0) }
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
            var pointer: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, type, &pointer) > 0, let pointer else { return nil }
            let text = String(cString: pointer)
            switch UInt8(bitPattern: type) {
            case UInt8(ascii: "s"): return .string(text)
            case UInt8(ascii: "o"): return .objectPath(text)
            default: return .signature(text)
            }
        case UInt8(ascii: "a"):
            if contentSignature == "y" {
                var pointer: UnsafeRawPointer?
                var size = 0
                guard sd_bus_message_read_array(message, CChar(UInt8(ascii: "y")), &pointer, &size) >= 0 else { return nil }
                guard let pointer, size > 0 else { return .bytes([]) }
                return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: size)))
            }
            return readContainer(message, type, contentSignature) { .array(element: contentSignature, $0) }
        case UInt8(ascii: "e"):
            return readContainer(message, type, contentSignature) { items in
                items.count == 2 ? .dictEntry(items[0], items[1]) : .structure(items)
            }
        case UInt8(ascii: "v"):
            return readContainer(message, type, contentSignature) { items in items.first.map { .variant($0) } ?? .structure([]) }
        case UInt8(ascii: "r"):
            return readContainer(message, type, contentSignature) { .structure($0) }
        default:
            _ = sd_bus_message_skip(message, nil)
            return nil
        }
    }

    private static func readBasic<T: BitwiseCopyable>(_ message: OpaquePointer, _ type: CChar, _ initial: T) -> T? {
        var value = initial
        guard sd_bus_message_read_basic(message, type, &value) > 0 else { return nil }
        return value
    }

    private static func readContainer(_ message: OpaquePointer, _ type: CChar, _ contents: String,
                                      _ build: ([DBusValue]) -> DBusValue) -> DBusValue? {
        guard sd_bus_message_enter_container(message, type, contents) > 0 else { return nil }
        var items: [DBusValue] = []
        while sd_bus_message_at_end(message, 0) == 0 {
            guard let item = read(message) else {
                _ = sd_bus_message_exit_container(message)
                return nil
            }
            items.append(item)
        }
        guard sd_bus_message_exit_container(message) >= 0 else { return nil }
        return build(items)
    }

    /// Appends `value` to `message`; returns a negative errno on failure.
    static func append(_ value: DBusValue, to message: OpaquePointer) -> Int32 {
        func basic<T: BitwiseCopyable>(_ type: UInt8, _ v: T) -> Int32 {
            var copy = v
            return sd_bus_message_append_basic(message, CChar(bitPattern: type), &copy)
        }
        switch value {
        case .byte(let v): return basic(UInt8(ascii: "y"), v)
        case .bool(let v): return basic(UInt8(ascii: "b"), Int32(v ? 1 : 0))
        case .int16(let v): return basic(UInt8(ascii: "n"), v)
        case .uint16(let v): return basic(UInt8(ascii: "q"), v)
        case .int32(let v): return basic(UInt8(ascii: "i"), v)
        case .uint32(let v): return basic(UInt8(ascii: "u"), v)
        case .int64(let v): return basic(UInt8(ascii: "x"), v)
        case .uint64(let v): return basic(UInt8(ascii: "t"), v)
        case .double(let v): return basic(UInt8(ascii: "d"), v)
        case .string(let s), .objectPath(let s), .signature(let s):
            let type: UInt8 =
                switch value {
                case .string: UInt8(ascii: "s")
                case .objectPath: UInt8(ascii: "o")
                default: UInt8(ascii: "g")
                }
            // For string types sd-bus takes the char* itself, not a pointer to it.
            return s.withCString { sd_bus_message_append_basic(message, CChar(bitPattern: type), $0) }
        case .bytes(let bytes):
            return bytes.withUnsafeBytes { sd_bus_message_append_array(message, CChar(UInt8(ascii: "y")), $0.baseAddress, $0.count) }
        case .array(let element, let items):
            return container(message, "a", element, items)
        case .dictEntry(let key, let value):
            return container(message, "e", key.signature + value.signature, [key, value])
        case .variant(let inner):
            return container(message, "v", inner.signature, [inner])
        case .structure(let members):
            return container(message, "r", members.map(\.signature).joined(), members)
        }
    }

    private static func container(_ message: OpaquePointer, _ type: Character, _ contents: String, _ items: [DBusValue]) -> Int32 {
        let code = CChar(type.asciiValue ?? 0)
        var result = sd_bus_message_open_container(message, code, contents)
        guard result >= 0 else { return result }
        for item in items {
            result = append(item, to: message)
            guard result >= 0 else { return result }
        }
        return sd_bus_message_close_container(message)
    }
}

/// sd-bus property getter shared by every exported property: the variant is already open, append the value.
private func exportedPropertyGetter(
    _ bus: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ interface: UnsafePointer<CChar>?, _ property: UnsafePointer<CChar>?,
    _ reply: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ error: UnsafeMutablePointer<sd_bus_error>?
) -> Int32 {
    guard let userdata, let property, let reply else { return -EINVAL }
    let exported = Unmanaged<ExportedInterface>.fromOpaque(userdata).takeUnretainedValue()
    guard let value = exported.value(of: String(cString: property)) else { return -ENOENT }
    return SDBusConnection.append(value, to: reply)
}

/// sd-bus method handler shared by every exported method: dispatches to the interface's Swift handler.
private func exportedMethodHandler(
    _ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ error: UnsafeMutablePointer<sd_bus_error>?
) -> Int32 {
    guard let message, let userdata else { return -EINVAL }
    let exported = Unmanaged<ExportedInterface>.fromOpaque(userdata).takeUnretainedValue()
    let member = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
    let arguments = SDBusConnection.readAll(message)
    switch exported.handler(member, arguments) {
    case .failure(let failure):
        return sd_bus_error_set(error, failure.name, failure.message)
    case .success(let values):
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return -ENOMEM }
        defer { sd_bus_message_unref(reply) }
        for value in values {
            let result = SDBusConnection.append(value, to: reply)
            if result < 0 { return result }
        }
        let bus = sd_bus_message_get_bus(message)
        return sd_bus_send(bus, reply, nil)
    }
}
