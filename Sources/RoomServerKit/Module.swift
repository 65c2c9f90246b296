// The room service. See docs/protocol.md and docs/room-semantics.md.
enum RoomServerKitModule {}
