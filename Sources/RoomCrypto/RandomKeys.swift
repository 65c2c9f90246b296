import RoomMedia

extension SRTPMasterKey {
    /// 28 fresh bytes from the CSPRNG: the server makes two per participant session.
    public static func random() -> SRTPMasterKey { SRTPMasterKey(bytes: SecureRandom.bytes(size))! }
}

extension MediaEncryption {
    /// Fresh keys for both directions.
    public static func random() -> MediaEncryption { MediaEncryption(uplink: .random(), downlink: .random()) }
}
