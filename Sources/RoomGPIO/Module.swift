/// Buttons and LEDs (docs/gpio.md).
enum RoomGPIOModule {}
