import SpamFilter

/// Deterministic random numbers for reproducible randomized tests (SplitMix64).
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

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
