import BotSupport
import SpamFilter


/// Builds candidates with a running message id.
struct CandidateFactory {
    var counter = 0
    mutating func text(_ text: String, from sender: String, at time: Double, direction: SpamDirection = .nostrToMesh) -> SpamCandidate {
        counter += 1
        return SpamCandidate(senderKey: sender, messageID: "m\(counter)", timestamp: time, content: .text(text), direction: direction)
    }

    mutating func attachment(from sender: String, at time: Double) -> SpamCandidate {
        counter += 1
        return SpamCandidate(senderKey: sender, messageID: "m\(counter)", timestamp: time, content: .attachment, direction: .meshToNostr)
    }
}

/// Random lowercase "words" separated by spaces: low autocorrelation, no links, no near-copies.
func randomProse(length: Int, using rng: inout SeededRandom) -> String {
    var scalars: [Character] = []
    let letters = Array("abcdefghijklmnopqrstuvwxyz")
    while scalars.count < length {
        if !scalars.isEmpty, scalars.last != " ", rng.next() % 6 == 0, scalars.count < length - 1 {
            scalars.append(" ")
        } else {
            scalars.append(letters[Int(rng.next() % 26)])
        }
    }
    return String(scalars)
}

func scalars(_ s: String) -> [UInt32] { s.unicodeScalars.map(\.value) }
