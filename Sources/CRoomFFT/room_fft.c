// The FFT is header-only (include/room_fft.h); SwiftPM wants one source file per C target.
#include "room_fft.h"
