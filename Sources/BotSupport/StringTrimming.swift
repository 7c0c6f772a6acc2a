extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    public var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...lastIndex(where: { !isSpace($0) })!])
    }
}
