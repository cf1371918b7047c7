// Non-maximum suppression, torchvision.ops.nms semantics, for one image, per class, and per
// image of a batch, entirely on the GPU (no mask copied to the host, no host loop).
//
// The pipeline, for B segments (images) of S candidates each:
//   cupyprep_nms_keys<TS, BEST, TK>   one sort key per candidate, ascending = the NMS order:
//                                  high part the segment (or a class hash, GROUP), low 32 bits
//                                  ~order_key(score) (descending score, NaN first, -0 == +0),
//                                  all ones below the score threshold; stored sign-flipped so
//                                  a signed sort orders it as unsigned. TK int: one segment.
//   cupyprep_nms_small_sort        a stable argsort of the keys (ties by ascending candidate
//                                  index) for one segment of up to 4096; larger inputs are
//                                  sorted by the array library (torch.sort, cupy.argsort)
//   cupyprep_nms_small<TS, TB, CLS>  keys, small sort and gather in one block (one segment)
//   cupyprep_nms_gather<TB, CLS, TK>  the first Kc candidates of every segment in that order:
//                                  boxes as float32, class, candidate id; the valid count m;
//                                  also clears the reduce's state and pre-fills the outputs
//   cupyprep_nms_first_chunk       (class-sorted order only) per 64-row chunk, the first chunk
//                                  holding its first row's class run
//   cupyprep_nms_mask<HALF, CLASSES, FIRST>  the predecessor bitmask in 64 x 64 tiles: tile
//                                  (rb, c) word r: bit i set when row i of chunk c comes
//                                  before row 64 rb + r and their IoU > threshold (and same
//                                  class); tiles c <= rb only (c >= first chunk when FIRST)
//   cupyprep_nms_reduce<GROUPED>   the greedy pass, one warp per 64-row chunk, chunks of a
//                                  segment chained in order through published kept words
//   cupyprep_nms_final_keys / _final_ids  (class-sorted order) the kept rows back in score
//                                  order, through one more sort
//   cupyprep_nms_emit<TB, TS>      detections of the kept candidates (boxes, scores) padded
//
// IoU is torchvision's CUDA arithmetic: float32 (for float16 boxes the side lengths rounded
// to float16, as c10::Half arithmetic rounds them), with every operation rounded separately
// (no fused multiply-adds), max/min ignoring NaN as fmaxf/fminf do.
#include "common.cuh"

namespace {

constexpr unsigned long long kSign = 0x8000000000000000ull;

// Ascending order of floats as uint32: NaN above everything, -0.0 as +0.0.
__device__ __forceinline__ unsigned int order_key(float s) {
    if (s != s) return 0xFFFFFFFFu;
    if (s == 0.0f) s = 0.0f;
    const unsigned int bits = __float_as_uint(s);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// Sort keys as stored (sign-flipped, so signed order is unsigned order) and back.
__device__ __forceinline__ void store_key(long long* k, unsigned long long u) {
    *k = (long long)(u ^ kSign);
}
__device__ __forceinline__ void store_key(int* k, unsigned long long u) {
    *k = (int)((unsigned int)u ^ 0x80000000u);
}
__device__ __forceinline__ unsigned int key_low(long long k) {
    return (unsigned int)((unsigned long long)k & 0xFFFFFFFFull);
}
__device__ __forceinline__ unsigned int key_low(int k) { return (unsigned int)k ^ 0x80000000u; }

__device__ __forceinline__ float round_half(float v) {
    return cp::to_float(cp::from_float<cp_half>(v));
}

// area = (x2 - x1) * (y2 - y1) as torchvision's devIoU computes it for T
template <bool HALF>
__device__ __forceinline__ float box_area(float x1, float y1, float x2, float y2) {
    float h = __fsub_rn(y2, y1);
    if (HALF) h = round_half(h);
    return __fmul_rn(__fsub_rn(x2, x1), h);
}

struct __align__(16) Box {
    float x1, y1, x2, y2;
};

template <bool HALF>
__device__ __forceinline__ bool iou_above(const Box& a, float area_a, const Box& b, float area_b,
                                          float threshold) {
    float w = __fsub_rn(fminf(a.x2, b.x2), fmaxf(a.x1, b.x1));
    float h = __fsub_rn(fminf(a.y2, b.y2), fmaxf(a.y1, b.y1));
    if (HALF) {
        w = round_half(w);
        h = round_half(h);
    }
    w = fmaxf(w, 0.0f);
    h = fmaxf(h, 0.0f);
    const float inter = __fmul_rn(w, h);
    return __fdiv_rn(inter, __fsub_rn(__fadd_rn(area_a, area_b), inter)) > threshold;
}

// The box the candidate test below uses for b: b itself when x2 > x1 and y2 > y1; a box
// that meets nothing when b is degenerate (its IoU with anything has w <= 0 or h <= 0); one
// that meets everything when a coordinate is NaN (fminf / fmaxf skip NaN, so the exact test
// decides).
__device__ __forceinline__ Box overlap_box(const Box& b) {
    const float inf = __int_as_float(0x7F800000);
    if (b.x1 != b.x1 || b.y1 != b.y1 || b.x2 != b.x2 || b.y2 != b.y2) return Box{-inf, -inf, inf, inf};
    if (!(b.x2 > b.x1 && b.y2 > b.y1)) return Box{inf, inf, -inf, -inf};
    return b;
}

// Bit i: the overlap boxes of `a` and tile[i] intersect with positive width and height.
// For a threshold >= 0, an IoU above it needs min(x2) - max(x1) > 0 and the same in y, which
// for boxes without NaN means a.x2 > b.x1, b.x2 > a.x1 (and a, b not degenerate), and in y;
// so these bits hold every pair the exact test can accept, and it runs on them alone.
__device__ __forceinline__ unsigned long long overlap_bits(const Box& a, const Box* tile) {
    unsigned int lo = 0, hi = 0;
#pragma unroll 8
    for (int i = 0; i < 32; ++i) {
        const Box b = tile[i];
        lo |= (unsigned int)((a.x2 > b.x1) & (b.x2 > a.x1) & (a.y2 > b.y1) & (b.y2 > a.y1)) << i;
    }
#pragma unroll 8
    for (int i = 0; i < 32; ++i) {
        const Box b = tile[32 + i];
        hi |= (unsigned int)((a.x2 > b.x1) & (b.x2 > a.x1) & (a.y2 > b.y1) & (b.y2 > a.y1)) << i;
    }
    return ((unsigned long long)hi << 32) | lo;
}

// Rows of segment b's packed tile mask: tile (rb, c), c <= rb, is 64 words at
// 64 * (rb (rb + 1) / 2 + c); a segment holds cb (cb + 1) / 2 tiles.
__device__ __forceinline__ cp::i64 tile_offset(cp::i64 rb, cp::i64 c) {
    return 64 * (rb * (rb + 1) / 2 + c);
}

// 64-bit loads and stores that go to the L2 cache every time (the reduce's chunk chain).
__device__ __forceinline__ unsigned long long load_volatile(const unsigned long long* p) {
    return *(const volatile unsigned long long*)p;
}
__device__ __forceinline__ void store_volatile(unsigned long long* p, unsigned long long v) {
    *(volatile unsigned long long*)p = v;
}

// A chunk's published state: two words (tag << 32 | kept bits 0-31, tag << 32 | bits 32-63),
// tag != 0 once written (the state starts zeroed). Each word is written whole, so a reader
// that sees the same nonzero tag in both has the chunk's final kept word.
__device__ __forceinline__ bool read_state(const unsigned long long* s, unsigned long long& kept,
                                           unsigned int& tag) {
    const unsigned long long w0 = load_volatile(s), w1 = load_volatile(s + 1);
    tag = (unsigned int)(w0 >> 32);
    kept = (w0 & 0xFFFFFFFFull) | (w1 << 32);
    return tag != 0 && tag == (unsigned int)(w1 >> 32);
}

}  // namespace

// One key per candidate. BEST = false: candidate (n, c) of segment b is scores[b, n, c],
// id n * C + c. BEST = true: one candidate per box, its best class (the highest in the sort
// order, the lowest class among ties) written to best[b * N + n]. group (one segment only,
// else NULL): the high key part is the low 32 bits of group[n * s_group] (a class), so a
// class's candidates are contiguous (classes whose low 32 bits agree share a run).
// Candidates first, first + stride, ... (a grid's or one block's threads).
template <typename TS, bool BEST, typename TK>
__device__ __forceinline__ void candidate_keys(const TS* scores, cp::i64 s_b, cp::i64 s_n,
                                               cp::i64 s_c, int N, int C, int has_threshold,
                                               float score_threshold, const long long* group,
                                               cp::i64 s_group, cp::i64 total, TK* keys,
                                               long long* best, cp::i64 first, cp::i64 stride) {
    const cp::i64 per_segment = BEST ? (cp::i64)N : (cp::i64)N * C;
    for (cp::i64 i = first; i < total; i += stride) {
        const cp::i64 b = i / per_segment;
        const cp::i64 id = i - b * per_segment;
        float s;
        if (BEST) {
            const TS* row = scores + b * s_b + id * s_n;
            int best_c = 0;
            s = cp::to_float(row[0]);
            unsigned int best_k = order_key(s);
            for (int c = 1; c < C; ++c) {
                const float v = cp::to_float(row[c * s_c]);
                const unsigned int k = order_key(v);
                if (k > best_k) {
                    best_k = k;
                    best_c = c;
                    s = v;
                }
            }
            best[i] = best_c;
        } else {
            const cp::i64 n = id / C;
            const cp::i64 c = id - n * C;
            s = cp::to_float(scores[b * s_b + n * s_n + c * s_c]);
        }
        const bool valid = !has_threshold || s > score_threshold;
        const unsigned int k = valid ? ~order_key(s) : 0xFFFFFFFFu;
        const unsigned long long high =
            group != nullptr ? (unsigned long long)(unsigned int)group[id * s_group] : (unsigned long long)b;
        store_key(keys + i, (high << 32) | k);
    }
}

template <typename TS, bool BEST, typename TK>
__global__ void cupyprep_nms_keys(const TS* __restrict__ scores, cp::i64 s_b, cp::i64 s_n,
                                  cp::i64 s_c, int N, int C, int has_threshold,
                                  float score_threshold, const long long* __restrict__ group,
                                  cp::i64 s_group, cp::i64 total, TK* __restrict__ keys,
                                  long long* __restrict__ best) {
    candidate_keys<TS, BEST, TK>(scores, s_b, s_n, s_c, N, C, has_threshold, score_threshold, group, s_group,
                                 total, keys, best, (cp::i64)blockIdx.x * blockDim.x + threadIdx.x,
                                 (cp::i64)blockDim.x * gridDim.x);
}

// The stable ascending argsort of one segment's int keys (as cupyprep_nms_keys stores
// them) for up to kSmallSort candidates, in one block: each key with its index below it
// as one 64-bit word (so equal keys keep index order and every word is distinct), padded
// with all-ones words to m (a power of two, n <= m <= kSmallSort), bitonic-sorted in
// shared memory; perm[i] is the index in the i-th word. One launch instead of a library
// sort's several, for the common small inputs. blockDim.x >= 32 threads, any count: each
// takes every blockDim.x-th compare-exchange pair of a step.
constexpr int kSmallSort = 4096;

__device__ __forceinline__ void block_argsort(const int* keys, int n, int m,
                                              long long* perm, unsigned long long* v) {
    for (int i = threadIdx.x; i < m; i += blockDim.x) {
        v[i] = i < n ? ((unsigned long long)((unsigned int)keys[i] ^ 0x80000000u) << 32) | (unsigned int)i
                     : ~0ull;
    }
    __syncthreads();
    for (int k = 2; k <= m; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < (m >> 1); t += blockDim.x) {
                const int i = ((t & ~(j - 1)) << 1) | (t & (j - 1));  // pair (i, i + j)
                const unsigned long long a = v[i], b = v[i + j];
                if ((a > b) == ((i & k) == 0)) {  // ascending where bit k of i is clear
                    v[i] = b;
                    v[i + j] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) perm[i] = (long long)(v[i] & 0xFFFFFFFFull);
}

__global__ void cupyprep_nms_small_sort(const int* __restrict__ keys, int n, int m,
                                        long long* __restrict__ perm) {
    __shared__ unsigned long long v[kSmallSort];
    block_argsort(keys, n, m, perm, v);
}

// CLS: 0 no classes, 1 class = id % C (candidates per class), 2 class = idxs[box]
// (batched_nms), 3 class = best[segment, id] (best class per box).
// Also: zero[0, n_zero) = 0 and fill[0, n_fill) = -1. Items first, first + stride, ...
template <typename TB, int CLS, typename TK>
__device__ __forceinline__ void gather_candidates(
    const TB* boxes, cp::i64 s_b, cp::i64 s_n, cp::i64 s_x, const TK* keys,
    const long long* perm, const long long* class_src, cp::i64 s_cls,
    cp::i64 per_segment, int C, int Kc, cp::i64 total, float* sboxes,
    long long* scls, long long* sid, int* mcount,
    unsigned long long* zero, cp::i64 n_zero, long long* fill, cp::i64 n_fill,
    cp::i64 first, cp::i64 stride) {
    for (cp::i64 i = first; i < n_zero; i += stride) zero[i] = 0ull;
    for (cp::i64 i = first; i < n_fill; i += stride) fill[i] = -1;
    for (cp::i64 i = first; i < total; i += stride) {
        const cp::i64 b = i / Kc;
        const int j = (int)(i - b * Kc);
        const cp::i64 p = perm[b * per_segment + j];
        const cp::i64 id = p - b * per_segment;
        const cp::i64 n = (CLS == 1) ? id / C : id;
        const TB* q = boxes + b * s_b + n * s_n;
#pragma unroll
        for (int k = 0; k < 4; ++k) sboxes[i * 4 + k] = cp::to_float(q[k * s_x]);
        if (CLS == 1) scls[i] = id - n * C;
        if (CLS == 2) scls[i] = class_src[n * s_cls];
        if (CLS == 3) scls[i] = class_src[p];
        sid[i] = id;
        // the valid candidates come first: the last valid one (or the first, when none is)
        // writes the segment's count
        const bool valid = key_low(keys[p]) != 0xFFFFFFFFu;
        if (!valid) {
            if (j == 0) mcount[b] = 0;
        } else {
            bool last = (j + 1 == Kc);
            if (!last) {
                const cp::i64 p2 = perm[b * per_segment + j + 1];
                last = key_low(keys[p2]) == 0xFFFFFFFFu;
            }
            if (last) mcount[b] = j + 1;
        }
    }
}

template <typename TB, int CLS, typename TK>
__global__ void cupyprep_nms_gather(const TB* __restrict__ boxes, cp::i64 s_b, cp::i64 s_n,
                                    cp::i64 s_x, const TK* __restrict__ keys,
                                    const long long* __restrict__ perm,
                                    const long long* __restrict__ class_src, cp::i64 s_cls,
                                    cp::i64 per_segment, int C, int Kc, cp::i64 total,
                                    float* __restrict__ sboxes, long long* __restrict__ scls,
                                    long long* __restrict__ sid, int* __restrict__ mcount,
                                    unsigned long long* __restrict__ zero, cp::i64 n_zero,
                                    long long* __restrict__ fill, cp::i64 n_fill) {
    gather_candidates<TB, CLS, TK>(boxes, s_b, s_n, s_x, keys, perm, class_src, s_cls, per_segment, C, Kc, total,
                                   sboxes, scls, sid, mcount, zero, n_zero, fill, n_fill,
                                   (cp::i64)blockIdx.x * blockDim.x + threadIdx.x, (cp::i64)blockDim.x * gridDim.x);
}

// keys -> small sort -> gather for one segment of up to kSmallSort candidates (int keys,
// no group), in one block: one launch instead of three. The block's threads share the
// keys and the order through global memory, after a barrier (so keys, best and perm are
// not __restrict__: no read of them may go through the read-only cache). BEST = (CLS ==
// 3): the best class of each box goes to best, which the gather reads as class_src.
template <typename TS, typename TB, int CLS>
__global__ void cupyprep_nms_small(const TS* __restrict__ scores, cp::i64 s_n, cp::i64 s_c, int N, int C,
                                   int has_threshold, float score_threshold, int* keys, long long* best,
                                   int m, long long* perm,
                                   const TB* __restrict__ boxes, cp::i64 b_n, cp::i64 b_x,
                                   const long long* __restrict__ class_src, cp::i64 s_cls, int Kc,
                                   float* __restrict__ sboxes, long long* __restrict__ scls,
                                   long long* __restrict__ sid, int* __restrict__ mcount,
                                   unsigned long long* __restrict__ zero, cp::i64 n_zero,
                                   long long* __restrict__ fill, cp::i64 n_fill) {
    __shared__ unsigned long long v[kSmallSort];
    const cp::i64 S = CLS == 3 ? (cp::i64)N : (cp::i64)N * C;
    candidate_keys<TS, CLS == 3, int>(scores, 0, s_n, s_c, N, C, has_threshold, score_threshold, nullptr, 0, S,
                                      keys, best, threadIdx.x, blockDim.x);
    __syncthreads();
    block_argsort(keys, (int)S, m, perm, v);
    __syncthreads();
    gather_candidates<TB, CLS, int>(boxes, 0, b_n, b_x, keys, perm, CLS == 3 ? best : class_src, s_cls, S, C, Kc,
                                    Kc, sboxes, scls, sid, mcount, zero, n_zero, fill, n_fill, threadIdx.x,
                                    blockDim.x);
}

// Class-sorted order (one segment, classes contiguous by the low 32 bits of
// scls): first[rb] = the chunk holding the first row of row 64 rb's class run. Rows of
// chunk rb can only be suppressed by rows of chunks first[rb] .. rb.
__global__ void cupyprep_nms_first_chunk(const long long* __restrict__ scls, int cb,
                                         int* __restrict__ first) {
    const int stride = blockDim.x * gridDim.x;
    for (int rb = blockIdx.x * blockDim.x + threadIdx.x; rb < cb; rb += stride) {
        const unsigned int key = (unsigned int)scls[64 * (cp::i64)rb];
        int lo = 0, hi = 64 * rb;  // the first position whose class key is not below key
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if ((unsigned int)scls[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        first[rb] = lo >> 6;
    }
}

// grid (cb, Y, B), 64 threads: two warps, each computing whole tiles (rb = blockIdx.x,
// c = first + 2 * blockIdx.y + warp, stepping 2 Y) of segment blockIdx.z; lane l holds
// rows 64 rb + l and 64 rb + l + 32.
template <bool HALF, bool CLASSES, bool FIRST>
__global__ void __launch_bounds__(64, 16) cupyprep_nms_mask(const float* __restrict__ sboxes,
                                  const long long* __restrict__ scls,
                                  const int* __restrict__ mcount, const int* __restrict__ first,
                                  int Kc, int cb, float iou_threshold,
                                  unsigned long long* __restrict__ mask) {
    const int rb = blockIdx.x;
    const cp::i64 b = blockIdx.z;
    const int m = mcount[b];
    if (rb * 64 >= m) return;
    const int c_lo = FIRST ? first[rb] : 0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int c = c_lo + 2 * blockIdx.y + warp;
    if (c > rb) return;
    const Box* seg = reinterpret_cast<const Box*>(sboxes) + b * Kc;
    const long long* seg_cls = scls + b * Kc;
    unsigned long long* seg_mask = mask + b * tile_offset(cb, 0);
    __shared__ Box tile_box[2][64];
    __shared__ Box tile_overlap[2][64];
    __shared__ float tile_area[2][64];
    __shared__ long long tile_cls[2][CLASSES ? 64 : 1];
    Box* tb = tile_box[warp];
    Box* to = tile_overlap[warp];
    float* ta = tile_area[warp];
    long long* tc = tile_cls[warp];
    // rows past m take the first row's values; their words are never read
    const int r0 = rb * 64 + lane, r1 = r0 + 32;
    const Box a0 = seg[r0 < m ? r0 : rb * 64], a1 = seg[r1 < m ? r1 : rb * 64];
    const Box o0 = overlap_box(a0), o1 = overlap_box(a1);
    const float area0 = box_area<HALF>(a0.x1, a0.y1, a0.x2, a0.y2);
    const float area1 = box_area<HALF>(a1.x1, a1.y1, a1.x2, a1.y2);
    long long cls0 = 0, cls1 = 0;
    if (CLASSES) {
        cls0 = seg_cls[r0 < m ? r0 : rb * 64];
        cls1 = seg_cls[r1 < m ? r1 : rb * 64];
    }
    const bool all_pairs = !(iou_threshold >= 0.0f);  // 0 IoU can pass: test every pair
    for (; c <= rb; c += 2 * gridDim.y) {
        // chunk c's rows (all below m when c < rb; on the diagonal only rows before the
        // lane's own are used)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = c * 64 + lane + 32 * h;
            const Box q = seg[i < m ? i : c * 64];
            tb[lane + 32 * h] = q;
            to[lane + 32 * h] = overlap_box(q);
            if (CLASSES) tc[lane + 32 * h] = seg_cls[i < m ? i : c * 64];
            ta[lane + 32 * h] = box_area<HALF>(q.x1, q.y1, q.x2, q.y2);
        }
        __syncwarp();
        unsigned long long out[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const Box& a = h ? a1 : a0;
            const float area = h ? area1 : area0;
            const long long cls = h ? cls1 : cls0;
            const int r = lane + 32 * h;
            unsigned long long cand = all_pairs ? ~0ull : overlap_bits(h ? o1 : o0, to);
            if (c == rb) cand &= (r == 0) ? 0ull : (~0ull >> (64 - r));  // rows before r
            if (c * 64 + 64 > m) cand &= ~0ull >> (c * 64 + 64 - m);         // rows below m
            unsigned long long bits = 0;
            while (cand != 0ull) {
                const int i = __ffsll((long long)cand) - 1;
                cand &= cand - 1ull;
                if (CLASSES && tc[i] != cls) continue;
                if (iou_above<HALF>(a, area, tb[i], ta[i], iou_threshold)) bits |= 1ull << i;
            }
            out[h] = bits;
        }
        unsigned long long* dst = seg_mask + tile_offset(rb, c);
        dst[lane] = out[0];
        dst[lane + 32] = out[1];
        __syncwarp();
    }
}

// The greedy pass. One warp per 64-row chunk; lane l owns rows 64 rb + l and + 32. A block
// takes a ticket (the order blocks start in), so every chunk it waits for belongs to a block
// that is already running: chunk rb of segment b is ticket b * cb + rb.
//   1. Rows are suppressed by the kept rows of earlier chunks: OR of (tile (rb, c) word &
//      kept word of chunk c) over c. Earlier chunks' kept words are read as they get
//      published, 8 chunks at a time, their tile words loaded before the wait.
//   2. Within the chunk, the kept set K is the fixpoint of K = {rows not suppressed whose
//      earlier in-chunk neighbours (diagonal tile) are not in K}, iterated from all rows;
//      row t is right after t + 1 rounds, and a round that changes nothing ends it.
//   3. The chunk publishes its kept word. GROUPED = false: with tag = 1 + the number kept
//      through this chunk, so the next chunk learns its output position; kept ids go to
//      ids[b, pos] (pos < max_det), the last chunk writes counts[b]. GROUPED = true (class-
//      sorted rows: each row waits only for chunks from first[rb]): the kept word goes to
//      kept_out[rb] and counts[0] is incremented.
template <bool GROUPED>
__global__ void cupyprep_nms_reduce(const unsigned long long* __restrict__ mask,
                                    const int* __restrict__ mcount, const int* __restrict__ first,
                                    const long long* __restrict__ sid,
                                    const long long* __restrict__ scls, int Kc, int cb,
                                    int max_det, unsigned long long* __restrict__ state,
                                    unsigned int* __restrict__ ticket, long long* __restrict__ ids,
                                    long long* __restrict__ cls_out, long long* __restrict__ counts,
                                    unsigned long long* __restrict__ kept_out) {
    const int lane = threadIdx.x;
    unsigned int t = 0;
    if (lane == 0) t = atomicAdd(ticket, 1u);
    t = __shfl_sync(0xFFFFFFFFu, t, 0);
    const cp::i64 b = t / (unsigned int)cb;
    const int rb = (int)(t - b * cb);
    const int m = mcount[b];
    const int chunks = (m + 63) >> 6;
    if (rb >= chunks) {
        if (!GROUPED && rb == 0 && lane == 0) counts[b] = 0;
        return;
    }
    const unsigned long long* seg = mask + b * tile_offset(cb, 0);
    unsigned long long* st = state + b * cb * 2;
    const cp::i64 tile0 = tile_offset(rb, 0);
    const int c_lo = GROUPED ? first[rb] : 0;
    const bool v0 = rb * 64 + lane < m, v1 = rb * 64 + lane + 32 < m;
    const unsigned long long d0 = seg[tile0 + 64 * (cp::i64)rb + lane];
    const unsigned long long d1 = seg[tile0 + 64 * (cp::i64)rb + lane + 32];
    unsigned long long r0 = 0, r1 = 0;
    unsigned int before = 0;  // rows kept in chunks before rb (GROUPED = false)
    int c = c_lo;
    // 1a. chunks up to rb - 2, 8 at a time: their tile words are fetched first, then lane k
    // waits for chunk c + k
    while (c < rb - 1) {
        const int n = min(8, rb - 1 - c);
        unsigned long long p0[8], p1[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const cp::i64 o = tile0 + 64 * (cp::i64)(c + k);
            p0[k] = k < n ? seg[o + lane] : 0ull;
            p1[k] = k < n ? seg[o + lane + 32] : 0ull;
        }
        unsigned long long kept = 0;
        unsigned int tag = 0;
        if (lane < n) {
            while (!read_state(st + 2 * (c + lane), kept, tag)) {
            }
        }
        __syncwarp();
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const unsigned long long kk = __shfl_sync(0xFFFFFFFFu, kept, k);
            r0 |= p0[k] & kk;
            r1 |= p1[k] & kk;
        }
        c += n;
    }
    // 1b. chunk rb - 1, its tile words fetched before waiting
    if (c == rb - 1) {
        const cp::i64 o = tile0 + 64 * (cp::i64)c;
        const unsigned long long p0 = seg[o + lane], p1 = seg[o + lane + 32];
        unsigned long long kept;
        unsigned int tag;
        while (!read_state(st + 2 * c, kept, tag)) {
        }
        r0 |= p0 & kept;
        r1 |= p1 & kept;
        before = tag - 1;
    } else if (!GROUPED && rb > 0) {
        unsigned long long kept;
        unsigned int tag;
        while (!read_state(st + 2 * (rb - 1), kept, tag)) {
        }
        before = tag - 1;
    }
    // 2. the chunk's own greedy pass
    const bool open0 = v0 && r0 == 0ull, open1 = v1 && r1 == 0ull;
    unsigned long long K = ((unsigned long long)__ballot_sync(0xFFFFFFFFu, open1) << 32) |
                           __ballot_sync(0xFFFFFFFFu, open0);
    for (;;) {
        const bool k0 = open0 && (d0 & K) == 0ull, k1 = open1 && (d1 & K) == 0ull;
        const unsigned long long next = ((unsigned long long)__ballot_sync(0xFFFFFFFFu, k1) << 32) |
                                        __ballot_sync(0xFFFFFFFFu, k0);
        if (next == K) break;
        K = next;
    }
    // 3. publish, then write this chunk's outputs
    const unsigned int total = before + (unsigned int)__popcll(K);
    const unsigned long long tag = GROUPED ? 1ull : (unsigned long long)total + 1ull;
    if (lane == 0) {
        store_volatile(st + 2 * rb, (tag << 32) | (K & 0xFFFFFFFFull));
        store_volatile(st + 2 * rb + 1, (tag << 32) | (K >> 32));
    }
    if (GROUPED) {
        if (lane == 0) {
            kept_out[rb] = K;
            atomicAdd(reinterpret_cast<unsigned long long*>(counts), (unsigned long long)__popcll(K));
        }
        return;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = lane + 32 * h;
        if (!((K >> r) & 1ull)) continue;
        const unsigned int pos = before + (unsigned int)__popcll(r == 0 ? 0ull : (K << (64 - r)));
        if (pos >= (unsigned int)max_det) continue;
        const cp::i64 row = b * Kc + rb * 64 + r;
        ids[b * max_det + pos] = sid[row];
        if (cls_out != nullptr) cls_out[b * max_det + pos] = scls[row];
    }
    if (rb == chunks - 1 && lane == 0) counts[b] = min(total, (unsigned int)max_det);
}

// Class-sorted order: per row, the key that puts the kept rows back in score order (ties
// by ascending id) and the others last: (~order_key(score) << 32 | id), sign-flipped.
template <typename TS>
__global__ void cupyprep_nms_final_keys(const TS* __restrict__ scores, cp::i64 s_n,
                                        const long long* __restrict__ sid,
                                        const unsigned long long* __restrict__ kept, int m,
                                        long long* __restrict__ out) {
    const int stride = blockDim.x * gridDim.x;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < m; q += stride) {
        const bool keep = (kept[q >> 6] >> (q & 63)) & 1ull;
        const long long id = sid[q];
        const unsigned long long u =
            keep ? ((unsigned long long)~order_key(cp::to_float(scores[id * s_n])) << 32) |
                       (unsigned long long)id
                 : ~0ull;
        store_key(out + q, u);
    }
}

// ids[d] = the id in sorted final key d for d < count, -1 after; counts[0] = count.
__global__ void cupyprep_nms_final_ids(const long long* __restrict__ sorted,
                                       const long long* __restrict__ count, int n,
                                       long long* __restrict__ ids, long long* __restrict__ counts) {
    const int stride = blockDim.x * gridDim.x;
    const long long k = count[0];
    if (blockIdx.x == 0 && threadIdx.x == 0) counts[0] = k;
    for (int d = blockIdx.x * blockDim.x + threadIdx.x; d < n; d += stride)
        ids[d] = d < k ? (long long)(((unsigned long long)sorted[d] ^ kSign) & 0xFFFFFFFFull) : -1;
}

// Detections of the kept candidates: ids[b, d] is a candidate id (box n = id / per_box),
// padded slots (id < 0) get zeros and -1.
template <typename TB, typename TS>
__global__ void cupyprep_nms_emit(const TB* __restrict__ boxes, cp::i64 b_b, cp::i64 b_n,
                                  cp::i64 b_x, const TS* __restrict__ scores, cp::i64 s_b,
                                  cp::i64 s_n, cp::i64 s_c, const long long* __restrict__ ids,
                                  const long long* __restrict__ cls, int per_box, int max_det,
                                  cp::i64 total, TB* __restrict__ out_boxes,
                                  TS* __restrict__ out_scores, long long* __restrict__ out_index) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const cp::i64 b = i / max_det;
        const cp::i64 id = ids[i];
        if (id < 0) {
#pragma unroll
            for (int k = 0; k < 4; ++k) out_boxes[i * 4 + k] = cp::from_float<TB>(0.0f);
            out_scores[i] = cp::from_float<TS>(0.0f);
            out_index[i] = -1;
            continue;
        }
        const cp::i64 n = id / per_box;
        const TB* q = boxes + b * b_b + n * b_n;
#pragma unroll
        for (int k = 0; k < 4; ++k) out_boxes[i * 4 + k] = q[k * b_x];
        out_scores[i] = scores[b * s_b + n * s_n + cls[i] * s_c];
        out_index[i] = n;
    }
}
