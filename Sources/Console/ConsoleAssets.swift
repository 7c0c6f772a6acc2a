/// The console's files, compiled into the binary (no front-end build step). Plain HTML, CSS and JavaScript.
public enum ConsoleAssets {
    public struct Asset: Sendable {
        public let contentType: String
        public let body: [UInt8]
    }

    public static func asset(for path: String) -> Asset? {
        switch path {
        case "/console", "/console/": Asset(contentType: "text/html; charset=utf-8", body: Array(indexHTML.utf8))
        case "/console/app.css": Asset(contentType: "text/css; charset=utf-8", body: Array(appCSS.utf8))
        case "/console/app.js": Asset(contentType: "text/javascript; charset=utf-8", body: Array(appJS.utf8))
        default: nil
        }
    }
}
