import BotSupport
import Testing

@Suite("HTTP dates (RFC 9110 §5.6.7)")
struct HTTPDateTests {
    // RFC 9110 §5.6.7's own example, in its three forms: 784111777 = 1994-11-06T08:49:37Z.
    @Test(arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"])
    func theThreeForms(text: String) {
        #expect(HTTPDate.parse(text) == 784_111_777)
    }

    @Test func formatsIMFFixdate() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        // A leap day and the day after, in this project's era.
        #expect(HTTPDate.format(1_709_164_800) == "Thu, 29 Feb 2024 00:00:00 GMT")
        #expect(HTTPDate.format(1_709_251_199) == "Thu, 29 Feb 2024 23:59:59 GMT")
    }

    @Test func roundTripsEveryDayForFiftyYears() {
        var day: Int64 = 0
        while day < 50 * 366 {
            let seconds = day * 86_400 + 45_296  // 12:34:56
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds)
            day += 1
        }
    }

    @Test(arguments: [
        "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nvo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, xx Nov 1994 08:49:37 GMT", "garbage garbage garbage garbage garbage",
    ])
    func refusesWhatIsNotADate(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }
}
