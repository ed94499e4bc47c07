// case: a compile bomb: templates that instantiate themselves without end, in a tree that doubles at every level
// class: compile bomb
// expect: compile_error
// expect-simulated: compile_error
// evidence: output-has instantiation|recursion|depth
// evidence: within 20
//
// Each Bomb<N> instantiates Bomb<N + 1> twice over, through two different types, so no
// instantiation is shared and there is no base case. NVRTC stops at its instantiation
// depth limit with an error the reader sees; were it to run on, the job's wall clock,
// CPU and memory limits would end it.
template <int N, typename T>
struct Bomb {
    typedef typename Bomb<N + 1, T*>::type left;
    typedef typename Bomb<N + 1, const T*>::type right;
    typedef left type;
    static const int value = Bomb<N + 1, T*>::value + Bomb<N + 1, const T*>::value;
};

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i] + (float)Bomb<0, float>::value;
    }
}
