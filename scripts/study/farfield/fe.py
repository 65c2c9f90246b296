"""Causal frame-by-frame front-end stages on STFT frames (frames, bins[, mics]).

Every stage here uses only frames <= t to produce frame t (recursions run frame by frame; stages
whose weights are fixed per frame are evaluated for all frames at once, which is the same thing).
The only oracle inputs are those the brief allows: the true steering (geometry, active talker from
the dry signals) and the dry-reference VAD for the noise statistics.
"""
import numpy as np

from common import NB, FS, HOP, NFFT, diffuse_coherence

GAMMA = diffuse_coherence()  # (bins, 4, 4)


# ---- beamformer weights ------------------------------------------------------------------------

def w_das(steer):
    return steer / np.sum(np.abs(steer) ** 2, axis=-1, keepdims=True)


def _mvdr(R, d):
    """R (..., M, M), d (..., M) -> distortionless MVDR weights."""
    num = np.linalg.solve(R, d[..., None])[..., 0]
    den = np.einsum("...i,...i->...", d.conj(), num)
    return num / den[..., None]


def wng_db(w, d):
    return 10 * np.log10(np.abs(np.einsum("...i,...i->...", w.conj(), d)) ** 2
                         / np.sum(np.abs(w) ** 2, axis=-1))


def w_superdirective(steer, wng_min_db=-10.0, mu=None, R=None):
    """Superdirective MVDR for the diffuse coherence (or R), loading mu*I. If mu is None, the
    smallest loading (bisection on log mu per bin) with WNG >= wng_min_db. Computes only for the
    distinct steering vectors. steer: (frames, bins, M)."""
    R = GAMMA if R is None else R
    M = steer.shape[-1]
    eye = np.eye(M)
    # distinct steering rows
    flat = steer.reshape(steer.shape[0], -1)
    keys, inv = np.unique(flat.view(np.complex128).round(12), axis=0, return_inverse=True)
    inv = inv.ravel()
    uniq = keys.reshape(-1, steer.shape[1], M)
    out = np.empty_like(uniq)
    for u in range(len(uniq)):
        d = uniq[u]
        if mu is not None:
            out[u] = _mvdr(R + mu * eye, d)
            continue
        lo = np.full(d.shape[0], -8.0)  # log10 mu
        hi = np.full(d.shape[0], 3.0)
        w0 = _mvdr(R + 10 ** lo[:, None, None] * eye, d)
        ok0 = wng_db(w0, d) >= wng_min_db
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            w = _mvdr(R + 10 ** mid[:, None, None] * eye, d)
            good = wng_db(w, d) >= wng_min_db
            hi = np.where(good, mid, hi)
            lo = np.where(good, lo, mid)
        mu_b = np.where(ok0, 10 ** -8.0, 10 ** hi)
        out[u] = _mvdr(R + mu_b[:, None, None] * eye, d)
    return out[inv]


def apply_w(W, X):
    return np.einsum("tfi,tfi->tf", W.conj(), X)


# ---- online MVDR (noise covariance from oracle-VAD noise frames) ---------------------------------

def online_mvdr(X, steer, quiet, tau_s=1.0, load=1e-2, load_kind="eye", every=1, wng_min_db=None,
                return_w=False, w_fallback=None):
    """Rn = normalised recursive average of x x^H over quiet frames (forgetting time constant tau_s),
    loaded by load * tr(Rn)/M * (I or diffuse coherence). Until the first quiet frame: the
    superdirective beam. Weights recomputed every `every` frames (and on steering change).
    wng_min_db (with w_fallback (frames, bins, M), distortionless weights whose WNG is above the
    limit, e.g. the superdirective beam): per bin, w = (1-b) w_mvdr + b w_fallback with the smallest
    b in [0, 1] giving |w|^2 <= 10^(-wng_min_db/10) (still distortionless; closed form)."""
    T, F, M = X.shape
    alpha = np.exp(-HOP / (FS * tau_s))
    S = np.zeros((F, M, M), dtype=complex)
    norm = 0.0
    Y = np.empty((T, F), dtype=complex)
    W_all = np.empty((T, F, M), dtype=complex) if return_w else None
    eye = np.eye(M)
    base = eye if load_kind == "eye" else GAMMA + 1e-2 * eye
    w = None
    last_d = None
    since = every
    for t in range(T):
        x = X[t]
        d = steer[t]
        if quiet[t]:
            S = alpha * S + (1 - alpha) * np.einsum("fi,fj->fij", x, x.conj())
            norm = alpha * norm + (1 - alpha)
        since += 1
        if w is None or since >= every or np.any(d != last_d):
            if norm == 0.0:
                R = GAMMA + 1e-2 * eye
            else:
                R = S / norm
                R = R + load * (np.trace(R, axis1=1, axis2=2).real / M)[:, None, None] * base
            w = _mvdr(R, d)
            if wng_min_db is not None:
                w = _wng_blend(w, w_fallback[t], 10 ** (-wng_min_db / 10))
            since = 0
            last_d = d
        Y[t] = np.einsum("fi,fi->f", w.conj(), x)
        if return_w:
            W_all[t] = w
    return (Y, W_all) if return_w else Y


def _wng_blend(w, wf, limit):
    """Smallest b in [0,1] with |(1-b) w + b wf|^2 <= limit (per bin)."""
    dw = wf - w
    a = np.sum(np.abs(dw) ** 2, axis=-1)
    bq = 2 * np.real(np.sum(w.conj() * dw, axis=-1))
    c = np.sum(np.abs(w) ** 2, axis=-1) - limit
    disc = np.maximum(bq * bq - 4 * a * c, 0)
    b = (-bq - np.sqrt(disc)) / (2 * np.maximum(a, 1e-30))
    b = np.where(c <= 0, 0.0, np.clip(b, 0.0, 1.0))
    return (1 - b)[:, None] * w + b[:, None] * wf


# ---- online WPE (RLS, as nara_wpe.online_wpe_step; own vectorised implementation) ----------------

def _wpe_predict(G, xt, x, pmean, fl, power):
    """One frame of RLS-WPE's prediction: x (bins, D) less G^H xt; the desired signal's power
    (power: "obs" the observation's, "pred" the output's, else their geometric mean), floored
    fl below its running mean. -> (e, lambda, the running mean)."""
    e = x - np.einsum("fkd,fk->fd", G.conj(), xt)
    if power == "obs":
        p = np.mean(np.abs(x) ** 2, axis=1)
    elif power == "pred":   # the current output (dereverberated with the filter so far)
        p = np.mean(np.abs(e) ** 2, axis=1)
    else:                   # geometric mean of both
        p = np.sqrt(np.mean(np.abs(x) ** 2, axis=1) * np.mean(np.abs(e) ** 2, axis=1))
    pmean = 0.99 * pmean + 0.01 * p
    return e, np.maximum(p, fl * pmean) + 1e-12, pmean


def _rls_update(P, G, xt, e, lam, alpha):
    """The RLS step of the prediction filter G (bins, taps, D) and inverse correlation P."""
    Px = np.einsum("fij,fj->fi", P, xt)
    den = alpha * lam + np.einsum("fi,fi->f", xt.conj(), Px).real
    k = Px / den[:, None]
    return (P - np.einsum("fi,fj->fij", k, Px.conj())) / alpha, G + np.einsum("fi,fd->fid", k, e.conj())


def online_wpe(X, taps=10, delay=3, alpha=0.99, bins=None, update_every=1, pfloor_db=-40.0, power="obs"):
    """X (frames, bins, D) -> dereverberated (frames, bins, D). Prediction from frames
    t-delay ... t-delay-taps+1 (delay as in nara_wpe's offline wpe). Power of the desired signal:
    the current observation's power averaged over channels, floored at pfloor_db below its running
    mean (power="obs"); "pred": the current output's power; "geo": geometric mean. bins: process only bins < bins (others pass through)."""
    T, F, D = X.shape
    Fp = F if bins is None else bins
    K = taps
    DK = D * K
    P = np.tile(np.eye(DK, dtype=complex), (Fp, 1, 1))
    G = np.zeros((Fp, DK, D), dtype=complex)
    Z = X.copy()
    hist = np.zeros((delay + K, Fp, D), dtype=complex)  # hist[0] = frame t-1
    pmean = np.full(Fp, 1e-10)
    fl = 10 ** (pfloor_db / 10)
    for t in range(T):
        x = X[t, :Fp]
        xt = hist[delay - 1:delay - 1 + K].transpose(1, 0, 2).reshape(Fp, DK)  # frames t-delay..
        e, lam, pmean = _wpe_predict(G, xt, x, pmean, fl, power)
        Z[t, :Fp] = e
        if t % update_every == 0:
            P, G = _rls_update(P, G, xt, e, lam, alpha)
        hist = np.roll(hist, 1, axis=0)
        hist[0] = x
    return Z


def online_wpe_beam(X, W, taps=6, delay=3, alpha=0.995, pfloor_db=-40.0, power="geo", bins=None, fade=0, own_past=False):
    """One-channel RLS-WPE on the beam y(t) = W(t)^H X(t) whose past observations are the mics' past
    seen through the beam of now, W(t)^H X(t-d), not the past beam outputs: when the beam turns,
    the prediction's inputs turn with it. X (frames, bins, M), W (frames, bins, M) -> (frames, bins)."""
    T, F, M = X.shape
    Fp = F if bins is None else bins
    K = taps
    P = np.tile(np.eye(K, dtype=complex), (Fp, 1, 1))
    G = np.zeros((Fp, K, 1), dtype=complex)
    Y = np.einsum("tfi,tfi->tf", W.conj(), X)
    Z = Y.copy()
    pmean = np.full(Fp, 1e-10)
    fl = 10 ** (pfloor_db / 10)
    since = 10 ** 9
    for t in range(T):
        w = W[t, :Fp]
        if t > 0 and np.any(W[t] != W[t - 1]):
            since = 0
        since += 1
        xt = np.zeros((Fp, K), dtype=complex)
        for j in range(K):
            s = t - delay - j
            if s >= 0:
                xt[:, j] = Y[s, :Fp] if own_past else np.einsum("fi,fi->f", w.conj(), X[s, :Fp])
        x = Y[t, :Fp, None]
        e, lam, pmean = _wpe_predict(G, xt, x, pmean, fl, power)
        g = 1.0 if fade <= 0 else min(1.0, since / fade)
        Z[t, :Fp] = (x + g * (e - x))[:, 0]
        P, G = _rls_update(P, G, xt, e, lam, alpha)
    return Z


# ---- single-channel post-processing ---------------------------------------------------------------

def recursive_noise_psd(Y, quiet, tau_s=1.0):
    """Noise PSD of a single-channel STFT from oracle-VAD quiet frames, causal."""
    T, F = Y.shape
    a = np.exp(-HOP / (FS * tau_s))
    out = np.empty((T, F))
    S = np.zeros(F)
    n = 0.0
    first = None
    for t in range(T):
        if quiet[t]:
            S = a * S + (1 - a) * np.abs(Y[t]) ** 2
            n = a * n + (1 - a)
        out[t] = S / n if n > 0 else np.abs(Y[t]) ** 2 * 0.0 + 1e-12
    return out


def minstat_noise_psd(Y, win_s=1.5, smooth=0.85, bias=1.5):
    """Blind causal noise PSD: minimum of the smoothed periodogram over a sliding window."""
    T, F = Y.shape
    L = int(win_s * FS / HOP)
    P = np.empty((T, F))
    s = np.abs(Y[0]) ** 2
    for t in range(T):
        s = smooth * s + (1 - smooth) * np.abs(Y[t]) ** 2
        P[t] = s
    out = np.empty((T, F))
    # sub-window minimum tracking (as Martin's), simplified: running min over the last L frames
    from scipy.ndimage import minimum_filter1d
    m = minimum_filter1d(P, size=L, axis=0, origin=(L - 1) // 2)  # window [t-L+1, t]
    return bias * m


def late_reverb_gain(Y, rt60, Tl=0.05, noise_psd=None, gmin_db=-12.0, smooth=0.6, dd=0.9, kappa=1.0,
                     rule="wiener"):
    """Lebart/Habets statistical late-reverberation suppression (+ optional noise PSD), causal.
    late PSD(t) = kappa * exp(-2 delta Tl) * Pyy(t - Nl), delta = 3 ln10 / rt60, Pyy recursively
    smoothed |Y|^2. Decision-directed a-priori SIR, Wiener gain, floor gmin."""
    T, F = Y.shape
    Nl = max(1, int(round(Tl * FS / HOP)))
    delta = 3 * np.log(10) / rt60
    decay = np.exp(-2 * delta * Nl * HOP / FS) * kappa
    Pyy = np.zeros((T, F))
    s = np.zeros(F)
    for t in range(T):
        s = smooth * s + (1 - smooth) * np.abs(Y[t]) ** 2
        Pyy[t] = s
    lam = np.zeros((T, F))
    lam[Nl:] = decay * Pyy[:-Nl]
    if noise_psd is not None:
        lam = lam + noise_psd
    lam = np.maximum(lam, 1e-14)
    gmin = 10 ** (gmin_db / 20)
    G = np.empty((T, F))
    prev = np.zeros(F)
    for t in range(T):
        gamma = np.abs(Y[t]) ** 2 / lam[t]
        xi = dd * prev / lam[t] + (1 - dd) * np.maximum(gamma - 1, 0)
        xi = np.maximum(xi, 10 ** (-25 / 10))
        g = xi / (1 + xi)
        g = np.maximum(g, gmin)
        G[t] = g
        prev = (g * np.abs(Y[t])) ** 2
    return G


def mccowan_gain(X, steer, alpha=0.8, gmin_db=-12.0, gamma_max=0.9, zelinski=False):
    """McCowan & Bourlard post-filter (diffuse coherence; Zelinski if zelinski=True: coherence 0)
    on the steering-aligned mic signals; bins where the pairwise noise coherence exceeds gamma_max
    are excluded from the pair average (gain 1 if none is left)."""
    T, F, M = X.shape
    a = steer.conj() / np.abs(steer) ** 2 * np.abs(steer)  # phase align and normalise to mic 0 level
    pairs = [(i, j) for i in range(M) for j in range(i + 1, M)]
    Gam = np.zeros((F, len(pairs)))
    if not zelinski:
        for k, (i, j) in enumerate(pairs):
            Gam[:, k] = GAMMA[:, i, j].real
    Phi = np.zeros((F, M, M), dtype=complex)
    gmin = 10 ** (gmin_db / 20)
    G = np.empty((T, F))
    for t in range(T):
        xa = X[t] * a[t]
        Phi = alpha * Phi + (1 - alpha) * np.einsum("fi,fj->fij", xa, xa.conj())
        num = np.zeros(F)
        cnt = np.zeros(F)
        for k, (i, j) in enumerate(pairs):
            ok = Gam[:, k] < gamma_max
            est = (Phi[:, i, j].real - 0.5 * Gam[:, k] * (Phi[:, i, i].real + Phi[:, j, j].real)) / (1 - Gam[:, k])
            num += np.where(ok, est, 0)
            cnt += ok
        den = np.mean(np.einsum("fii->fi", Phi).real, axis=1) + 1e-14
        g = np.where(cnt > 0, num / np.maximum(cnt, 1) / den, 1.0)
        G[t] = np.clip(g, gmin, 1.0)
    return G
