/// Why a byte buffer is not a WAV file roomd can use.
///
/// The message names the chunk and field at fault so a user who passed the wrong file (or
/// a 24-bit export) can fix it without a hex editor; callers prefix the file name.
public struct WAVError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
