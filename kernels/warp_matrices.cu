// Matrices made on the device for the warps: random_affine's, and estimate_similarity's /
// align_faces' (each with its inverse, the matrix the warp kernels read).
#include "common.cuh"

namespace {

// invertAffineTransform of m (row-major 2 x 3) into v, each operation rounded on its own
// as _matrix_math.invert_affine (the CPU path's and OpenCV's formula): D = 1 / det, or 0
// for a singular m (returns false).
__device__ __forceinline__ bool invert_affine(const double (&m)[6], double* v) {
    double d = __dsub_rn(__dmul_rn(m[0], m[4]), __dmul_rn(m[1], m[3]));
    const bool regular = d != 0.0;
    d = regular ? __ddiv_rn(1.0, d) : 0.0;
    const double i00 = __dmul_rn(m[4], d), i11 = __dmul_rn(m[0], d);
    const double i01 = __dmul_rn(m[1], -d), i10 = __dmul_rn(m[3], -d);
    v[0] = i00, v[1] = i01, v[2] = __dsub_rn(__dmul_rn(-i00, m[2]), __dmul_rn(i01, m[5]));
    v[3] = i10, v[4] = i11, v[5] = __dsub_rn(__dmul_rn(-i10, m[2]), __dmul_rn(i11, m[5]));
    return regular;
}

__device__ __forceinline__ void store6(double* out, const double (&m)[6]) {
#pragma unroll
    for (int j = 0; j < 6; ++j) out[j] = m[j];
}

}  // namespace

// Image i's source-to-destination matrix and its inverse, from its six uniforms u[i, 0..5]
// in [0, 1) (row-major, n x 6): angle, scale, shear, x shift, y shift, flip. Each operation
// is rounded on its own, in the order of augment._affine_from_uniforms (its NumPy
// formula, the CPU path), in one launch. det = s^2 f is never 0.
__global__ void cupyprep_random_affine_matrices(
    const double* __restrict__ u, int n, double deg0, double deg_span, double sc0,
    double sc_span, double sh0, double sh_span, double rad, double tx_span, double ty_span,
    double flip_p, double cx, double cy, double* __restrict__ mats, double* __restrict__ inv) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double* r = u + (cp::i64)i * 6;
        const double a = __dmul_rn(__dadd_rn(deg0, __dmul_rn(deg_span, r[0])), rad);
        const double s = __dadd_rn(sc0, __dmul_rn(sc_span, r[1]));
        const double k = tan(__dmul_rn(__dadd_rn(sh0, __dmul_rn(sh_span, r[2])), rad));
        const double tx = __dmul_rn(__dsub_rn(__dmul_rn(2.0, r[3]), 1.0), tx_span);
        const double ty = __dmul_rn(__dsub_rn(__dmul_rn(2.0, r[4]), 1.0), ty_span);
        const double f = r[5] < flip_p ? -1.0 : 1.0;
        const double c = cos(a), sn = sin(a);
        double m[6];
        m[0] = __dmul_rn(__dmul_rn(s, c), f);
        m[1] = __dmul_rn(s, __dadd_rn(__dmul_rn(c, k), sn));
        m[3] = __dmul_rn(__dmul_rn(-s, sn), f);
        m[4] = __dmul_rn(s, __dsub_rn(c, __dmul_rn(sn, k)));
        m[2] = __dsub_rn(__dadd_rn(cx, tx), __dadd_rn(__dmul_rn(m[0], cx), __dmul_rn(m[1], cy)));
        m[5] = __dsub_rn(__dadd_rn(cy, ty), __dadd_rn(__dmul_rn(m[3], cx), __dmul_rn(m[4], cy)));
        store6(mats + (cp::i64)i * 6, m);
        invert_affine(m, inv + (cp::i64)i * 6);
    }
}

// Umeyama's least-squares similarity from k point pairs per set (row-major (k, 2) float64
// each; set i starts at src + i * src_step, dst + i * dst_step, a step of 0 repeats one
// set): with centered points p, q, a = sum(p . q) / sum |p|^2, b = sum(p_x q_y - p_y q_x) /
// sum |p|^2, M = [[a, -b, tx], [b, a, ty]], the translation mapping src's centroid to
// dst's. Sums run in point order (NumPy's pairwise sums may differ in the last bits). A set
// whose src points all coincide (sum |p|^2 = 0) sets bit 0 of *flags; with inv given, the
// inverse goes there too (invert_affine), and a singular M (a = b = 0) sets bit 1.
__global__ void cupyprep_similarity(const double* __restrict__ src, cp::i64 src_step,
                                    const double* __restrict__ dst, cp::i64 dst_step, int n,
                                    int k, double* __restrict__ mats, double* __restrict__ inv,
                                    int* __restrict__ flags) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double* s = src + (cp::i64)i * src_step;
        const double* d = dst + (cp::i64)i * dst_step;
        double sx = 0.0, sy = 0.0, dx = 0.0, dy = 0.0;
        for (int j = 0; j < k; ++j) {
            sx += s[2 * j];
            sy += s[2 * j + 1];
            dx += d[2 * j];
            dy += d[2 * j + 1];
        }
        sx /= k, sy /= k, dx /= k, dy /= k;
        double var = 0.0, dot = 0.0, cross = 0.0;
        for (int j = 0; j < k; ++j) {
            const double px = s[2 * j] - sx, py = s[2 * j + 1] - sy;
            const double qx = d[2 * j] - dx, qy = d[2 * j + 1] - dy;
            var += px * px + py * py;
            dot += px * qx + py * qy;
            cross += px * qy - py * qx;
        }
        int flag = var == 0.0 ? 1 : 0;
        const double a = dot / var, b = cross / var;
        const double m[6] = {a, -b, dx - (a * sx - b * sy), b, a, dy - (b * sx + a * sy)};
        store6(mats + (cp::i64)i * 6, m);
        if (inv && !invert_affine(m, inv + (cp::i64)i * 6)) flag |= 2;
        if (flag) atomicOr(flags, flag);
    }
}
