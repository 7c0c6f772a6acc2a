/// Why a relay CSV was rejected. Import is all-or-nothing: one bad row rejects the file, and the error
/// names the line (1-based, the header is line 1).
public enum RelayDirectoryImportError: Error, Equatable, Sendable, CustomStringConvertible {
    case fileSize(Int)
    case invalidUTF8
    case byteOrderMark
    case forbiddenCharacter(line: Int, scalar: UInt32)
    case quoteCharacter(line: Int)
    case header(String)
    case fieldCount(line: Int, count: Int)
    case address(line: Int, RelayAddress.Rejection)
    case coordinate(line: Int, String)
    case conflictingDuplicate(line: Int, address: String, firstLine: Int)
    case tooManyRows(Int)
    case empty

    public var description: String {
        switch self {
        case .fileSize(let n): "file is \(n) bytes (allowed 1…\(RelayDirectory.CSVLimits.maxFileBytes))"
        case .invalidUTF8: "file is not valid UTF-8"
        case .byteOrderMark: "file starts with a byte-order mark"
        case .forbiddenCharacter(let line, let scalar):
            "line \(line): forbidden character U+\(String(scalar, radix: 16, uppercase: true))"
        case .quoteCharacter(let line): "line \(line): '\"' is not allowed (no CSV quoting)"
        case .header(let h): "header '\(h)' is not 'Relay URL,Latitude,Longitude'"
        case .fieldCount(let line, let n): "line \(line): \(n) fields, expected 3"
        case .address(let line, let why): "line \(line): \(why)"
        case .coordinate(let line, let why): "line \(line): \(why)"
        case .conflictingDuplicate(let line, let address, let first):
            "line \(line): \(address) already listed on line \(first) with other coordinates"
        case .tooManyRows(let n): "\(n) data rows (max \(RelayDirectory.CSVLimits.maxRows))"
        case .empty: "no relay rows"
        }
    }
}

extension RelayDirectory {
    /// Bounds of the iOS parser and the upstream validator.
    public enum CSVLimits {
        /// Largest file accepted (iOS refuses bodies over 512 KiB).
        public static let maxFileBytes = 512 * 1024
        /// Most data rows and unique relays accepted (iOS and validator).
        public static let maxRows = 5000
    }

    /// Parses bitchat's relay CSV with the strict rules of the upstream validator and the iOS parser.
    ///
    /// Identical duplicate rows (after normalisation, so `host` and `host:443`) merge; the same address
    /// with other coordinates rejects the file. Blank lines are skipped.
    public static func importCSV(_ bytes: [UInt8], fileName: String, sha256: String) throws(RelayDirectoryImportError)
        -> RelayDirectory
    {
        guard (1...CSVLimits.maxFileBytes).contains(bytes.count) else { throw .fileSize(bytes.count) }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw .invalidUTF8 }
        guard !bytes.starts(with: [0xEF, 0xBB, 0xBF]) else { throw .byteOrderMark }

        // Split on bytes: in Swift "\r\n" is one Character, so splitting the String on "\n" would not split CRLF.
        var lines = bytes.split(separator: 0x0a, omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == 0x0d ? line.dropLast() : line, as: UTF8.self)
        }
        if lines.last?.isEmpty == true { lines.removeLast() }
        for (index, line) in lines.enumerated() {
            for scalar in line.unicodeScalars {
                let isControl = scalar.value < 0x20 && scalar != "\t"
                if isControl || scalar.value == 0x7f || scalar.properties.generalCategory == .format {
                    throw .forbiddenCharacter(line: index + 1, scalar: scalar.value)
                }
                if scalar == "\"" { throw .quoteCharacter(line: index + 1) }
            }
        }
        guard let header = lines.first else { throw .empty }
        let normalizedHeader = header.trimmingASCIIWhitespace().lowercased()
            .split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingASCIIWhitespace() }
        guard normalizedHeader == ["relay url", "latitude", "longitude"] || normalizedHeader == ["relay url", "lat", "lon"]
        else { throw .header(String(header)) }

        var byAddress: [String: (entry: RelayEntry, line: Int)] = [:]
        var dataRows = 0
        for (index, line) in lines.enumerated().dropFirst() {
            let lineNumber = index + 1
            if line.trimmingASCIIWhitespace().isEmpty { continue }
            dataRows += 1
            guard dataRows <= CSVLimits.maxRows else { throw .tooManyRows(dataRows) }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 3 else { throw .fieldCount(line: lineNumber, count: fields.count) }
            let address: String
            do {
                address = try RelayAddress.normalize(String(fields[0]))
            } catch {
                throw .address(line: lineNumber, error)
            }
            let latitude = try coordinate(fields[1], range: -90...90, name: "latitude", line: lineNumber)
            let longitude = try coordinate(fields[2], range: -180...180, name: "longitude", line: lineNumber)
            let entry = RelayEntry(address: address, latitude: latitude, longitude: longitude)
            if let existing = byAddress[address] {
                guard existing.entry == entry else {
                    throw .conflictingDuplicate(line: lineNumber, address: address, firstLine: existing.line)
                }
                continue
            }
            byAddress[address] = (entry, lineNumber)
        }
        guard !byAddress.isEmpty else { throw .empty }
        let source = RelayDirectorySource(
            file: fileName,
            sha256: sha256,
            dataRows: dataRows,
            uniqueRelays: byAddress.count,
            mergedDuplicates: dataRows - byAddress.count
        )
        return RelayDirectory(entries: byAddress.values.map(\.entry), source: source)
    }

    /// An ASCII decimal (optional sign, digits, optional fraction, optional exponent), finite and in range.
    private static func coordinate(
        _ field: Substring,
        range: ClosedRange<Double>,
        name: String,
        line: Int
    ) throws(RelayDirectoryImportError) -> Double {
        let text = field.trimmingASCIIWhitespace()
        guard isASCIIDecimal(text), let value = Double(text), value.isFinite else {
            throw .coordinate(line: line, "\(name) '\(text)' is not a decimal number")
        }
        guard range.contains(value) else { throw .coordinate(line: line, "\(name) \(text) is out of range") }
        return value
    }

    static func isASCIIDecimal(_ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        if let first = bytes.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let integerDigits = bytes.prefix(while: isDigit).count
        bytes = bytes.dropFirst(integerDigits)
        var fractionDigits = 0
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            fractionDigits = bytes.prefix(while: isDigit).count
            bytes = bytes.dropFirst(fractionDigits)
        }
        guard integerDigits + fractionDigits > 0 else { return false }
        if let e = bytes.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
            let exponentDigits = bytes.prefix(while: isDigit).count
            guard exponentDigits > 0 else { return false }
            bytes = bytes.dropFirst(exponentDigits)
        }
        return bytes.isEmpty
    }
}
