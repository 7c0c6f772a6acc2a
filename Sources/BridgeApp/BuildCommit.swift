extension BridgeVersion {
    /// The commit this binary was built from, for `bitchat_bridge_build_info`: "unknown" in a plain `swift build`;
    /// a release build stamps it first (`scripts/stamp-commit` rewrites this line from `git rev-parse`; the Dockerfile from its `BRIDGE_COMMIT` build argument).
    public static let commit = "unknown"
}
