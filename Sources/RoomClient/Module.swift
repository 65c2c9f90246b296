// Joins rooms for roomd. See docs/protocol.md.
enum RoomClientModule {}
