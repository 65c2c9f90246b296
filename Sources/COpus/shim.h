// Non-variadic wrappers around libopus's ctl calls: Swift cannot call C variadic functions,
// so each setting the engine uses gets one static inline function with a fixed signature.
#ifndef COPUS_H
#define COPUS_H
#include <opus.h>

static inline int copus_set_bitrate(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_BITRATE(v)); }
static inline int copus_set_complexity(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(v)); }
static inline int copus_set_inband_fec(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_INBAND_FEC(v)); }
static inline int copus_set_packet_loss_perc(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_PACKET_LOSS_PERC(v)); }
static inline int copus_set_dtx(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_DTX(v)); }
static inline int copus_set_signal_voice(OpusEncoder *e) { return opus_encoder_ctl(e, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE)); }
static inline int copus_set_signal_music(OpusEncoder *e) { return opus_encoder_ctl(e, OPUS_SET_SIGNAL(OPUS_SIGNAL_MUSIC)); }
static inline int copus_set_vbr(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_VBR(v)); }
static inline int copus_set_max_bandwidth(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_MAX_BANDWIDTH(v)); }
static inline int copus_get_lookahead(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(v)); }
/// 1 when the last encoded frame was a DTX frame (nothing worth sending).
static inline int copus_get_in_dtx(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_IN_DTX(v)); }
// Getters, so tests can read back what the encoder was configured with (issue 9).
static inline int copus_get_bitrate(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_BITRATE(v)); }
static inline int copus_get_complexity(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_COMPLEXITY(v)); }
static inline int copus_get_inband_fec(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_INBAND_FEC(v)); }
static inline int copus_get_packet_loss_perc(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_PACKET_LOSS_PERC(v)); }
static inline int copus_get_dtx(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_DTX(v)); }
static inline int copus_get_vbr(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_VBR(v)); }
static inline int copus_get_max_bandwidth(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_MAX_BANDWIDTH(v)); }
/// The audio band of the last encoded frame (OPUS_BANDWIDTH_*).
static inline int copus_get_bandwidth(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_BANDWIDTH(v)); }
static inline int copus_get_signal(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_SIGNAL(v)); }
static inline int copus_set_bandwidth_auto(OpusEncoder *e) { return opus_encoder_ctl(e, OPUS_SET_BANDWIDTH(OPUS_AUTO)); }
static inline int copus_bandwidth_narrowband(void) { return OPUS_BANDWIDTH_NARROWBAND; }
static inline int copus_bandwidth_mediumband(void) { return OPUS_BANDWIDTH_MEDIUMBAND; }
static inline int copus_signal_voice(void) { return OPUS_SIGNAL_VOICE; }
static inline int copus_signal_music(void) { return OPUS_SIGNAL_MUSIC; }
static inline int copus_decoder_reset(OpusDecoder *d) { return opus_decoder_ctl(d, OPUS_RESET_STATE); }
static inline int copus_encoder_reset(OpusEncoder *e) { return opus_encoder_ctl(e, OPUS_RESET_STATE); }
static inline int copus_decoder_last_packet_duration(OpusDecoder *d, opus_int32 *v) { return opus_decoder_ctl(d, OPUS_GET_LAST_PACKET_DURATION(v)); }

static inline int copus_application_voip(void) { return OPUS_APPLICATION_VOIP; }
static inline int copus_application_audio(void) { return OPUS_APPLICATION_AUDIO; }
static inline int copus_application_restricted_lowdelay(void) { return OPUS_APPLICATION_RESTRICTED_LOWDELAY; }
static inline int copus_bandwidth_fullband(void) { return OPUS_BANDWIDTH_FULLBAND; }
static inline int copus_bandwidth_wideband(void) { return OPUS_BANDWIDTH_WIDEBAND; }
static inline int copus_bandwidth_superwideband(void) { return OPUS_BANDWIDTH_SUPERWIDEBAND; }
#endif
