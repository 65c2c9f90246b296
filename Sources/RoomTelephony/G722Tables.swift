/// The numbers ITU-T G.722 fixes (64 kbit/s mode). They are the standard's, not tuning: any
/// change breaks interworking with every other G.722 coder, so they are kept as the
/// standard tabulates them rather than derived.
enum G722Tables {
    /// The quadrature mirror filter's 24 coefficients h(0)…h(23), which sum to 2^13.
    /// Symmetric; even taps act on one phase of the 16 kHz signal, odd taps on the other.
    static let qmf: [Int32] = [
        3, -11, -11, 53, 12, -156, 32, 362, -210, -805, 951, 3876,
        3876, 951, -805, -210, 362, 32, -156, 12, 53, -11, -11, 3,
    ]

    /// Lower sub-band quantizer decision levels (Q6 in the standard), relative to the scale
    /// factor in units of 2^-12: a magnitude below `level[m] × det / 4096` falls in interval m.
    /// Interval 0 is never chosen and 30 is everything above the last level.
    static let lowDecisionLevels: [Int32] = [
        0, 35, 72, 110, 150, 190, 233, 276, 323, 370, 422, 473, 530, 587, 650, 714,
        786, 858, 940, 1023, 1121, 1219, 1339, 1458, 1612, 1765, 1980, 2195, 2557, 2919,
    ]

    /// The 6-bit code the standard assigns to each interval (1…30) for a negative and for a
    /// non-negative difference. Codes 0…3 never leave an encoder.
    static let lowNegativeCodes: [Int32] = [
        0, 63, 62, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19,
        18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
    ]
    static let lowPositiveCodes: [Int32] = [
        0, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47,
        46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32,
    ]

    /// The lower band's inverse quantizer for all 6 bits (QL6, scaled by 2^-15 of the scale
    /// factor): what the decoder outputs. Indexed by code; the four unused codes decode to
    /// small values rather than failing.
    static let lowOutputLevels: [Int32] = [
        -136, -136, -136, -136, -24808, -21904, -19008, -16704,
        -14984, -13512, -12280, -11192, -10232, -9360, -8576, -7856,
        -7192, -6576, -6000, -5456, -4944, -4464, -4008, -3576,
        -3168, -2776, -2400, -2032, -1688, -1360, -1040, -728,
        24808, 21904, 19008, 16704, 14984, 13512, 12280, 11192,
        10232, 9360, 8576, 7856, 7192, 6576, 6000, 5456,
        4944, 4464, 4008, 3576, 3168, 2776, 2400, 2032,
        1688, 1360, 1040, 728, 432, 136, -432, -136,
    ]

    /// The lower band's inverse quantizer for the code's top 4 bits (QL4): the difference
    /// both ends adapt their predictors with (`G722SubBand.adaptLow`).
    static let lowAdaptationLevels: [Int32] = [
        0, -20456, -12896, -8968, -6288, -4240, -2584, -1200,
        20456, 12896, 8968, 6288, 4240, 2584, 1200, 0,
    ]

    /// The 4-bit code's magnitude class (0…7) for the log scale factor's update (RIL → IL4).
    static let lowMagnitudeClass: [Int32] = [0, 7, 6, 5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 0]

    /// How much each magnitude class moves the lower band's log scale factor (WL): small
    /// differences shrink the step size, large ones grow it quickly.
    static let lowScaleSteps: [Int32] = [-60, -30, 58, 172, 334, 538, 1198, 3042]

    /// The higher band's inverse quantizer (QH2) for its 2-bit codes.
    static let highOutputLevels: [Int32] = [-7408, -1616, 7408, 1616]

    /// The higher band's decision level (564 × det / 4096) and its codes: for a negative
    /// difference [inner, outer] = [1, 0], for a non-negative one [3, 2].
    static let highDecisionLevel: Int32 = 564
    static let highNegativeCodes: [Int32] = [1, 0]
    static let highPositiveCodes: [Int32] = [3, 2]

    /// How much each 2-bit code moves the higher band's log scale factor (WH via RH2).
    static let highScaleSteps: [Int32] = [798, -214, 798, -214]

    /// 2^(i/32) in Q11 for the fractional part of the log scale factor (ILB): the scale
    /// factor is this mantissa shifted by the log's integer part.
    static let scaleMantissas: [Int32] = [
        2048, 2093, 2139, 2186, 2233, 2282, 2332, 2383, 2435, 2489, 2543, 2599, 2656, 2714, 2774, 2834,
        2896, 2960, 3025, 3091, 3158, 3228, 3298, 3371, 3444, 3520, 3597, 3676, 3756, 3838, 3922, 4008,
    ]
}
