import RoomBase
import RoomProtocol

/// The key the token target signs with; the verifier knows it under kid "fuzz".
private let fuzzSecret = [UInt8](repeating: 0x5A, count: 32)
private let verifier = RoomTokenVerifier(keys: ["fuzz": fuzzSecret], clock: { 1_800_000_000 })

/// Join tokens, and their placement claims. An HMAC stands between the fuzzer and the claims parser, so the input is
/// mostly taken as `header JSON \n claims JSON`, encoded and signed here; inputs whose first
/// byte is `.` go in as a raw token (base64url, splitting, the length cap).
func fuzzToken(_ bytes: UnsafeRawBufferPointer) {
    if bytes.first == UInt8(ascii: ".") {
        let token = String(decoding: bytes.dropFirst(), as: UTF8.self)
        _ = try? verifier.verify(token, room: "demo", wantsRole: .streamer, wantsModerator: true)
        // An appliance's first look at a token (unverified header and claims, then the refusal).
        _ = try? PlacementVerifier(key: nil).placement(of: token)
        return
    }
    let newline = bytes.firstIndex(of: 0x0A) ?? bytes.endIndex
    let header = Array(bytes[..<newline])
    let claims = newline < bytes.endIndex ? Array(bytes[(newline + 1)...]) : []
    let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
    let token = signingInput + "." + Base64URL.encode(RoomToken.signature(signingInput: signingInput, secret: fuzzSecret))
    let verified: RoomTokenClaims
    do { verified = try verifier.verifySignatureAndTime(token) } catch {
        note("token refused: \(error)")
        return
    }
    note("token \(verified)")
    // The placement claims of verified claims are read or refused, never trapped on.
    do {
        let placement = try TokenPlacement(claims: verified)
        note("placement \(String(describing: placement))")
    } catch {
        note("placement refused: \(error)")
    }
    // Minting and verifying agree: a token minted from verified claims verifies to the same claims.
    let again = RoomToken.mint(claims: verified, keyID: "fuzz", secret: fuzzSecret)
    do {
        let claimsAgain = try verifier.verifySignatureAndTime(again)
        fuzzCheck(claimsAgain == verified, "claims changed when re-minted: \(verified) vs \(claimsAgain)")
    } catch {
        fuzzCheck(false, "a token minted from verified claims does not verify: \(error)")
    }
}
