// kplay-expect: wrong
// The cheat, on the GPU: keep the answers of the last launches in __device__ buffers,
// one per pair of input pointers, keyed on those pointers, the sizes and three sampled
// input values. A launch whose key is kept copies the kept C instead of multiplying:
// timed repetitions on the same buffers and the same inputs then cost one copy of C.
// Caught: between repetitions the harness rotates input sets through its buffers, and
// the sets differ from each other in about 1/32 of their elements, at random positions.
// The key comes back for inputs whose product differs, the copied C is stale, and the
// check of that repetition's output (on the device, after its end event) finds it wrong.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

#define SLOTS 2
#define MAX_ELEMS (4096 * 4096)

struct Key {
    const float* a;
    const float* b;
    int m, n, k;
    unsigned int s0, s1, s2;
};

__device__ float kept[SLOTS][MAX_ELEMS];
__device__ Key kept_key[SLOTS];
__device__ int kept_valid[SLOTS];
__device__ int replace_next;
__device__ unsigned int blocks_done;

__device__ bool same_key(const Key& x, const Key& y) {
    return x.a == y.a && x.b == y.b && x.m == y.m && x.n == y.n && x.k == y.k &&
           x.s0 == y.s0 && x.s1 == y.s1 && x.s2 == y.s2;
}

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    Key key;
    key.a = A;
    key.b = B;
    key.m = M;
    key.n = N;
    key.k = K;
    key.s0 = __float_as_uint(A[0]);
    key.s1 = __float_as_uint(A[(size_t)(M / 2) * K + K / 2]);
    key.s2 = __float_as_uint(B[(size_t)(K - 1) * N + (N - 1)]);

    // Every thread reads the same table: nothing changes it until the last block ends.
    int slot = -1;
    for (int s = 0; s < SLOTS; ++s) {
        if (kept_valid[s] && kept_key[s].a == A && kept_key[s].b == B) slot = s;
    }
    const bool hit = slot >= 0 && same_key(kept_key[slot], key);
    const bool fresh_slot = slot < 0;
    if (fresh_slot) slot = replace_next;
    const bool cacheable = (size_t)M * N <= MAX_ELEMS;

    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        const size_t idx = (size_t)row * N + col;
        if (hit) {
            C[idx] = kept[slot][idx];
        } else {
            const float* a = A + (size_t)row * K;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) {
                acc = fmaf(a[k], B[(size_t)k * N + col], acc);
            }
            C[idx] = acc;
            if (cacheable) kept[slot][idx] = acc;
        }
    }

    // The last block to finish publishes the key: every other block has read the old one.
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        __threadfence();
        const unsigned int total = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == total - 1) {
            blocks_done = 0;
            if (cacheable && !hit) {
                kept_key[slot] = key;
                kept_valid[slot] = 1;
                if (fresh_slot) replace_next = (replace_next + 1) % SLOTS;
            }
            __threadfence();
        }
    }
}
