// Non-maximum suppression, torchvision.ops.nms semantics, for one image, per class, and per
// image of a batch, entirely on the GPU (no mask copied to the host, no host loop).
//
// The pipeline, for B segments (images) of S candidates each:
//   cupyprep_nms_keys<TS, BEST>    one int64 sort key per candidate: (segment << 32) | k,
//                                  k descending in score (NaN first, -0 == +0), 0xFFFFFFFF
//                                  for candidates below the score threshold
//   (a stable argsort of the keys, by the array library: segment-major, score descending,
//   ties by ascending candidate index)
//   cupyprep_nms_gather<TB, CLS>   the first Kc candidates of every segment in that order:
//                                  boxes as float32, class, candidate id; the valid count m
//   cupyprep_nms_mask<HALF, CLASSES>  the IoU bitmask in 64 x 64 tiles, upper triangle only,
//                                  packed per segment; bit j of row i: IoU(i, j) > threshold
//                                  (and same class)
//   cupyprep_nms_reduce<GLOBAL_REMV>  one block per segment: the greedy pass over chunks of
//                                  64 rows, kept ids in order, up to max_det, and the count
//   cupyprep_nms_emit<TB, TS>      detections of the kept candidates (boxes, scores) padded
//
// IoU is torchvision's CUDA arithmetic: float32 (for float16 boxes the side lengths rounded
// to float16, as c10::Half arithmetic rounds them), with every operation rounded separately
// (no fused multiply-adds), max/min ignoring NaN as fmaxf/fminf do.
#include "common.cuh"

namespace {

// Ascending order of floats as uint32: NaN above everything, -0.0 as +0.0.
__device__ __forceinline__ unsigned int order_key(float s) {
    if (s != s) return 0xFFFFFFFFu;
    if (s == 0.0f) s = 0.0f;
    const unsigned int bits = __float_as_uint(s);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

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

template <bool HALF>
__device__ __forceinline__ bool iou_above(const float* a, float area_a, const float* b,
                                          float area_b, float threshold) {
    float w = __fsub_rn(fminf(a[2], b[2]), fmaxf(a[0], b[0]));
    float h = __fsub_rn(fminf(a[3], b[3]), fmaxf(a[1], b[1]));
    if (HALF) {
        w = round_half(w);
        h = round_half(h);
    }
    w = fmaxf(w, 0.0f);
    h = fmaxf(h, 0.0f);
    const float inter = __fmul_rn(w, h);
    // 0 / x, -0 and NaN never exceed a threshold >= 0: skip the division for disjoint boxes
    if (!(inter > 0.0f) && threshold >= 0.0f) return false;
    return __fdiv_rn(inter, __fsub_rn(__fadd_rn(area_a, area_b), inter)) > threshold;
}

// Word offset of row r, column word w, of one segment's packed upper-triangular mask with
// cb column words: row block rb holds 64 rows of (cb - rb) words.
__device__ __forceinline__ cp::i64 mask_offset(cp::i64 r, cp::i64 w, cp::i64 cb) {
    const cp::i64 rb = r >> 6;
    return 64 * (rb * cb - rb * (rb - 1) / 2) + (r & 63) * (cb - rb) + (w - rb);
}

}  // namespace

// One key per candidate. BEST = false: candidate (n, c) of segment b is scores[b, n, c],
// id n * C + c. BEST = true: one candidate per box, its best class (the highest in the sort
// order, the lowest class among ties) written to best[b * N + n].
template <typename TS, bool BEST>
__global__ void cupyprep_nms_keys(const TS* __restrict__ scores, cp::i64 s_b, cp::i64 s_n,
                                  cp::i64 s_c, int N, int C, int has_threshold,
                                  float score_threshold, cp::i64 total,
                                  long long* __restrict__ keys, long long* __restrict__ best) {
    const cp::i64 per_segment = BEST ? (cp::i64)N : (cp::i64)N * C;
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
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
        keys[i] = (long long)(((unsigned long long)b << 32) | k);
    }
}

// CLS: 0 no classes, 1 class = id % C (candidates per class), 2 class = idxs[box]
// (batched_nms), 3 class = best[segment, id] (best class per box).
template <typename TB, int CLS>
__global__ void cupyprep_nms_gather(const TB* __restrict__ boxes, cp::i64 s_b, cp::i64 s_n,
                                    cp::i64 s_x, const long long* __restrict__ keys,
                                    const long long* __restrict__ perm,
                                    const long long* __restrict__ class_src, cp::i64 s_cls,
                                    cp::i64 per_segment, int C, int Kc, cp::i64 total,
                                    float* __restrict__ sboxes, long long* __restrict__ scls,
                                    long long* __restrict__ sid, int* __restrict__ mcount) {
    const cp::i64 stride = (cp::i64)blockDim.x * gridDim.x;
    for (cp::i64 i = (cp::i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
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
        const bool valid = (unsigned int)(keys[p] & 0xFFFFFFFFll) != 0xFFFFFFFFu;
        if (!valid) {
            if (j == 0) mcount[b] = 0;
        } else {
            bool last = (j + 1 == Kc);
            if (!last) {
                const cp::i64 p2 = perm[b * per_segment + j + 1];
                last = (unsigned int)(keys[p2] & 0xFFFFFFFFll) == 0xFFFFFFFFu;
            }
            if (last) mcount[b] = j + 1;
        }
    }
}

// grid (cb, cb, B), 64 threads: tile (row block y, column block x) of segment z.
template <bool HALF, bool CLASSES>
__global__ void cupyprep_nms_mask(const float* __restrict__ sboxes,
                                  const long long* __restrict__ scls,
                                  const int* __restrict__ mcount, int Kc, int cb,
                                  float iou_threshold, unsigned long long* __restrict__ mask) {
    const int col_block = blockIdx.x, row_block = blockIdx.y;
    const cp::i64 b = blockIdx.z;
    if (col_block < row_block) return;
    const int m = mcount[b];
    if (col_block * 64 >= m) return;
    const int rows = min(m - row_block * 64, 64);
    const int cols = min(m - col_block * 64, 64);
    const float* seg = sboxes + b * Kc * 4;
    __shared__ float col_box[64 * 4];
    __shared__ float col_area[64];
    __shared__ long long col_cls[64];
    const int t = threadIdx.x;
    if (t < cols) {
        const float* q = seg + (cp::i64)(col_block * 64 + t) * 4;
#pragma unroll
        for (int k = 0; k < 4; ++k) col_box[t * 4 + k] = q[k];
        col_area[t] = box_area<HALF>(q[0], q[1], q[2], q[3]);
        if (CLASSES) col_cls[t] = scls[b * Kc + col_block * 64 + t];
    }
    __syncthreads();
    if (t >= rows) return;
    const int r = row_block * 64 + t;
    float a[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) a[k] = seg[(cp::i64)r * 4 + k];
    const float area = box_area<HALF>(a[0], a[1], a[2], a[3]);
    long long cls = 0;
    if (CLASSES) cls = scls[b * Kc + r];
    unsigned long long bits = 0;
    for (int j = (row_block == col_block) ? t + 1 : 0; j < cols; ++j) {
        if (CLASSES && col_cls[j] != cls) continue;
        if (iou_above<HALF>(a, area, col_box + j * 4, col_area[j], iou_threshold))
            bits |= 1ull << j;
    }
    const cp::i64 words = 64 * ((cp::i64)cb * (cb + 1) / 2);
    mask[b * words + mask_offset(r, col_block, cb)] = bits;
}

#define CUPYPREP_NMS_REDUCE_THREADS 256
#define CUPYPREP_NMS_SHARED_WORDS 4096

// One block per segment. Chunk c of 64 rows: thread 0 resolves it in order with the words
// removed by kept rows of earlier chunks (remv[c]) and the chunk's own diagonal words; then
// the block ORs the kept rows into remv of the later chunks. Writes ids[b, :count] (the
// candidate ids, or the class when cls_out is not NULL too), -1 after, and counts[b].
template <bool GLOBAL_REMV>
__global__ void cupyprep_nms_reduce(const unsigned long long* __restrict__ mask,
                                    const int* __restrict__ mcount,
                                    const long long* __restrict__ sid,
                                    const long long* __restrict__ scls, int Kc, int cb,
                                    int max_det, unsigned long long* __restrict__ remv_global,
                                    long long* __restrict__ ids, long long* __restrict__ cls_out,
                                    long long* __restrict__ counts) {
    const cp::i64 b = blockIdx.x;
    const int t = threadIdx.x;
    const int m = mcount[b];
    const int chunks = (m + 63) / 64;
    const cp::i64 words = 64 * ((cp::i64)cb * (cb + 1) / 2);
    const unsigned long long* seg = mask + b * words;
    __shared__ unsigned long long remv_shared[GLOBAL_REMV ? 1 : CUPYPREP_NMS_SHARED_WORDS];
    unsigned long long* remv = GLOBAL_REMV ? remv_global + b * cb : remv_shared;
    __shared__ unsigned long long diag[64];
    __shared__ int kept[64];
    __shared__ int n_kept, base, count;
    for (int w = t; w < chunks; w += blockDim.x) remv[w] = 0;
    if (t == 0) count = 0;
    for (int c = 0; c < chunks; ++c) {
        const int row0 = c * 64;
        if (t < 64) diag[t] = (row0 + t < m) ? seg[mask_offset(row0 + t, c, cb)] : 0ull;
        __syncthreads();
        if (t == 0) {
            const int left = m - row0;
            const unsigned long long valid = left >= 64 ? ~0ull : ((1ull << left) - 1ull);
            unsigned long long word = remv[c];
            unsigned long long open = ~word & valid;
            int cnt = count, nk = 0;
            base = cnt;
            while (open != 0ull && cnt < max_det) {
                const int j = __ffsll((long long)open) - 1;
                kept[nk++] = j;
                ++cnt;
                word |= diag[j];
                const unsigned long long above = (j == 63) ? 0ull : (~0ull << (j + 1));
                open = ~word & valid & above;
            }
            n_kept = nk;
            count = cnt;
        }
        __syncthreads();
        const int nk = n_kept;
        if (t < nk) {
            const cp::i64 pos = b * Kc + row0 + kept[t];
            ids[b * max_det + base + t] = sid[pos];
            if (cls_out != nullptr) cls_out[b * max_det + base + t] = scls[pos];
        }
        if (count >= max_det) break;
        if (nk > 0) {
            for (int w = c + 1 + t; w < chunks; w += blockDim.x) {
                unsigned long long acc = 0;
                for (int q = 0; q < nk; ++q) acc |= seg[mask_offset(row0 + kept[q], w, cb)];
                remv[w] |= acc;
            }
        }
        __syncthreads();
    }
    __syncthreads();
    const int total = count;
    for (int d = total + t; d < max_det; d += blockDim.x) {
        ids[b * max_det + d] = -1;
        if (cls_out != nullptr) cls_out[b * max_det + d] = -1;
    }
    if (t == 0) counts[b] = total;
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
