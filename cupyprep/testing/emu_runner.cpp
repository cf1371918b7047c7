// Runner of the CPU kernel emulator (cupyprep.testing).
//
// The emulator builds one executable per kernel variant: emu_cuda.h (force-included),
// then the kernel source, then this file, then a two-line main() that hands the requested
// instantiation to runner_main(). The file has two parts: the runtime (scheduler, fibers,
// launch record), compiled once into an object shared by every variant of a build
// configuration (CUPYPREP_EMU_RUNNER_PART=1), and the per-kernel part (runner_main and the
// parameter description), compiled with each kernel (CUPYPREP_EMU_RUNNER_PART=2). Without
// the macro both parts are compiled. One launch is one process run:
//
//   stdin   the launch record written by _emulator.py (layout below)
//   stdout  the contents of every data buffer after the grid ran, in record order
//   stderr  kernel printf output, the emulator's own errors, sanitizer reports
//
// `--describe` instead prints the kernel's parameter list (size, alignment, kind and type
// name of each), which the Python side uses to check arguments before a launch.
//
// Launch record, little-endian:
//   char[8]  "CPEMU01\0"
//   u32      grid x, y, z, block x, y, z
//   u32      mode (0: threads one after another, 1: threads as fibers)
//   u32      fiber stack size in KiB
//   u32      buffer count, parameter count
//   buffers  u32 kind (0 data, 1 bytes holding pointers), u64 byte count, u64 alignment
//            offset, then the bytes; for kind 1 also its pointers (below)
//   params   u32 kind (0 by value, 1 pointer into a buffer, 2 NULL pointer, 3 by value
//            holding pointers), u32 size, then for by value: the bytes (kind 3: then its
//            pointers); for a pointer: i32 buffer index, u64 offset
//   pointers u32 count, then per pointer: u64 byte offset of its 8 bytes (in the buffer
//            or parameter), i32 buffer index (-1 for NULL), u64 byte offset into that buffer
//            (a pointer table is a kind 1 buffer of pointers only; a ragged batch's
//            per-image records carry one pointer each)
//
// Every buffer is its own heap allocation of exactly its size, so AddressSanitizer's
// redzone sits right after the last byte: one element past the end is reported.

// No kernel code follows; the CUDA spellings must not reach the system headers below.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__
#undef __align__
#undef __builtin_align__
#undef __constant__
#undef __shared__
#undef __managed__

#include <csignal>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

// Context switches between fibers: on x86-64 a few instructions (below); elsewhere, or
// with -DCUPYPREP_EMU_UCONTEXT, glibc's swapcontext, which also makes a system call to
// save and restore the signal mask on every switch.
#if defined(__x86_64__) && !defined(CUPYPREP_EMU_UCONTEXT)
#define CUPYPREP_EMU_FAST_SWITCH 1
#else
#define CUPYPREP_EMU_FAST_SWITCH 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUPYPREP_EMU_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define CUPYPREP_EMU_ASAN 0
#endif

namespace cupyprep_emu {
// The runtime's entry points for the per-kernel part.
//
// load_launch: redirects stdout, reads the launch record from stdin, allocates the
// buffers and returns the parameter slots (checked against the kernel's parameter sizes
// and which of them are pointers). run_launch: runs the grid, calling `invoke` once per
// thread, then writes the buffers to the original stdout. Returns the exit status.
void** load_launch(size_t nparams, const size_t* sizes, const bool* is_ptr);
int run_launch(void (*invoke)());
}  // namespace cupyprep_emu

#if !defined(CUPYPREP_EMU_RUNNER_PART) || CUPYPREP_EMU_RUNNER_PART == 1
// ============================== runtime ==============================================
#if CUPYPREP_EMU_FAST_SWITCH
// cupyprep_emu_switch(save, load): push the callee-saved registers and the SSE/x87
// control words, store the stack pointer to *save, continue on the stack `load` (which
// was saved the same way, or prepared by make_fibers to "return" into fiber_main).
extern "C" void cupyprep_emu_switch(void** save, void* load);
asm(R"(
    .text
    .p2align 4
    .globl cupyprep_emu_switch
    .type cupyprep_emu_switch, @function
cupyprep_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cupyprep_emu_switch, .-cupyprep_emu_switch
)");
#endif

namespace cupyprep_emu {

uint3 g_threadIdx;
uint3 g_blockIdx;
dim3 g_blockDim;
dim3 g_gridDim;

namespace {

constexpr int kExitEmulatorError = 86;

enum ThreadState : unsigned char { kReady, kAtBarrier, kAtWarp, kExited };

struct Thread {
#if CUPYPREP_EMU_FAST_SWITCH
    void* sp;
#else
    ucontext_t ctx;
#endif
    void* fake_stack;  // AddressSanitizer's bookkeeping while the fiber is switched out
    char* stack_lo;
    uint3 idx;
    unsigned char state;
    int op;
    const char* op_name;
    unsigned mask;
    int arg;
    int width;
    unsigned long long value;
    unsigned long long result;
};

struct Buffer {
    unsigned kind;
    unsigned long long size;
    unsigned long long pad;
    unsigned char* data;  // first byte the arrays see (after the alignment offset)
};

struct Scheduler {
    bool fibers = false;
    bool running = false;       // inside the grid loop: errors name the block
    bool in_thread = false;     // a kernel thread (not the scheduler) is running
    const struct Buffer* buffers = nullptr;
    unsigned nbuffers = 0;
    unsigned nthreads = 0;
    Thread* threads = nullptr;
    unsigned current = 0;
    unsigned live = 0;
    unsigned at_barrier = 0;
    unsigned at_warp = 0;
    size_t stack_size = 0;
    void (*invoke)() = nullptr;
#if CUPYPREP_EMU_FAST_SWITCH
    void* main_sp = nullptr;
#else
    ucontext_t main_ctx;
#endif
    const void* main_stack_bottom = nullptr;
    size_t main_stack_size = 0;
    bool context_printed = false;
};
Scheduler S;

void write_all(int fd, const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t k = ::write(fd, p, n);
        if (k <= 0) {
            std::fprintf(stderr, "cupyprep emulator: writing results failed\n");
            std::_Exit(kExitEmulatorError);
        }
        p += k;
        n -= (size_t)k;
    }
}

// Names the block (and thread) that was running and where the buffers lie. Called from
// signal handlers and the sanitizers' death callback too, so it only formats into a stack
// buffer and write()s.
void print_context() {
    if (S.context_printed) return;
    S.context_printed = true;
    char buf[256];
    int n = 0;
    if (S.running && S.in_thread)
        n = std::snprintf(buf, sizeof buf,
                          "cupyprep emulator: in block (%u, %u, %u), thread (%u, %u, %u) of a grid "
                          "(%u, %u, %u) of blocks (%u, %u, %u)\n",
                          g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, g_threadIdx.x, g_threadIdx.y,
                          g_threadIdx.z, g_gridDim.x, g_gridDim.y, g_gridDim.z, g_blockDim.x,
                          g_blockDim.y, g_blockDim.z);
    else if (S.running)
        n = std::snprintf(buf, sizeof buf,
                          "cupyprep emulator: in block (%u, %u, %u) of a grid (%u, %u, %u) of "
                          "blocks (%u, %u, %u)\n",
                          g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, g_gridDim.x, g_gridDim.y,
                          g_gridDim.z, g_blockDim.x, g_blockDim.y, g_blockDim.z);
    if (n > 0) write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    for (unsigned b = 0; b < S.nbuffers && b < 64; ++b) {
        const Buffer& B = S.buffers[b];
        n = std::snprintf(buf, sizeof buf, "cupyprep emulator: buffer #%u at [%p, %p)\n", b,
                          (void*)B.data, (void*)(B.data + B.size));
        if (n > 0) write_all(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    }
}

void on_fatal_signal(int sig) {
    print_context();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

void on_sanitizer_death() { print_context(); }

// --- fibers ----------------------------------------------------------------------------------
void yield_to_scheduler() {
    Thread& t = S.threads[S.current];
#if CUPYPREP_EMU_ASAN
    __sanitizer_start_switch_fiber(&t.fake_stack, S.main_stack_bottom, S.main_stack_size);
#endif
#if CUPYPREP_EMU_FAST_SWITCH
    cupyprep_emu_switch(&t.sp, S.main_sp);
#else
    swapcontext(&t.ctx, &S.main_ctx);
#endif
#if CUPYPREP_EMU_ASAN
    __sanitizer_finish_switch_fiber(t.fake_stack, nullptr, nullptr);
#endif
}

// Each fiber lives for the whole launch and runs its thread of every block in turn: it
// never abandons a half-finished stack, so the stacks need no cleaning between blocks.
void fiber_main() {
#if CUPYPREP_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.main_stack_bottom, &S.main_stack_size);
#endif
    const unsigned me = S.current;
    for (;;) {
        S.invoke();
        S.threads[me].state = kExited;
        S.live--;
        yield_to_scheduler();
    }
}

void resume(unsigned i) {
    Thread& t = S.threads[i];
    S.current = i;
    g_threadIdx = t.idx;
#if CUPYPREP_EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, t.stack_lo, S.stack_size);
#endif
    S.in_thread = true;
#if CUPYPREP_EMU_FAST_SWITCH
    cupyprep_emu_switch(&S.main_sp, t.sp);
#else
    swapcontext(&S.main_ctx, &t.ctx);
#endif
    S.in_thread = false;
#if CUPYPREP_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void make_fibers() {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t stride = S.stack_size + page;
    char* base = static_cast<char*>(mmap(nullptr, stride * S.nthreads, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED) fail("could not map %u fiber stacks", S.nthreads);
    for (unsigned i = 0; i < S.nthreads; ++i) {
        char* lo = base + i * stride;
        mprotect(lo, page, PROT_NONE);  // guard page: a stack overflow faults
        Thread& t = S.threads[i];
        t.stack_lo = lo + page;
        t.fake_stack = nullptr;
#if CUPYPREP_EMU_FAST_SWITCH
        // The frame cupyprep_emu_switch pops: control words, six registers, then the
        // "return address" fiber_main, entered with the stack aligned as after a call.
        unsigned int mxcsr = 0;
        unsigned short fpucw = 0;
        asm volatile("stmxcsr %0" : "=m"(mxcsr));
        asm volatile("fnstcw %0" : "=m"(fpucw));
        unsigned long long* sp =
            reinterpret_cast<unsigned long long*>(t.stack_lo + S.stack_size);
        *--sp = 0;  // fiber_main's own return address: it never returns
        *--sp = (unsigned long long)(uintptr_t)&fiber_main;
        for (int k = 0; k < 6; ++k) *--sp = 0;  // rbp = 0 ends frame-pointer unwinding
        *--sp = (unsigned long long)mxcsr | ((unsigned long long)fpucw << 32);
        t.sp = sp;
#else
        getcontext(&t.ctx);
        t.ctx.uc_stack.ss_sp = t.stack_lo;
        t.ctx.uc_stack.ss_size = S.stack_size;
        t.ctx.uc_link = nullptr;
        makecontext(&t.ctx, fiber_main, 0);
        // AddressSanitizer's swapcontext wrapper clears the shadow of the target context's
        // uc_stack on every switch, which would both cost time and erase the redzones of
        // the suspended frames; the switches are announced to it explicitly instead.
        t.ctx.uc_stack.ss_sp = nullptr;
        t.ctx.uc_stack.ss_size = 0;
#endif
    }
}

// --- warp collectives ---------------------------------------------------------------------
const char* op_label(const Thread& t) { return t.op_name ? t.op_name : "?"; }

void resolve_warp(unsigned w, unsigned base, unsigned count, unsigned live_mask, unsigned waiting) {
    const unsigned first = (unsigned)__builtin_ctz(waiting);
    const Thread& a = S.threads[base + first];
    for (unsigned l = 0; l < count; ++l) {
        if (!(waiting >> l & 1u)) continue;
        const Thread& b = S.threads[base + l];
        if (b.op != a.op || b.mask != a.mask || b.width != a.width)
            fail("warp %u: lane %u is in %s(mask 0x%08x, width %d) while lane %u is in "
                 "%s(mask 0x%08x, width %d): the lanes of a warp must reach the same "
                 "collective together",
                 w, first, op_label(a), a.mask, a.width, l, op_label(b), b.mask, b.width);
    }
    if (a.mask != live_mask)
        fail("warp %u: %s called with mask 0x%08x, but the warp's lanes that have not exited "
             "are 0x%08x; the emulator requires the mask to name exactly those lanes",
             w, op_label(a), a.mask, live_mask);
    unsigned long long ballot = 0;
    for (unsigned l = 0; l < count; ++l)
        if ((waiting >> l & 1u) && S.threads[base + l].value != 0) ballot |= 1ull << l;
    const int width = a.width;
    for (unsigned l = 0; l < count; ++l) {
        if (!(waiting >> l & 1u)) continue;
        Thread& t = S.threads[base + l];
        switch (t.op) {
            case kBallot: t.result = ballot; break;
            case kAny: t.result = ballot != 0; break;
            case kAll: t.result = ballot == waiting; break;
            case kSyncWarp: t.result = 0; break;
            default: {
                // The PTX shfl.sync rule: a source outside the lane's segment of `width`
                // lanes (or past the warp) gives the lane its own value back.
                const int lane = (int)l;
                const int b = t.arg & 31;
                const int seg_lo = lane & ~(width - 1);
                const int seg_hi = seg_lo | (width - 1);
                int j = lane;
                bool ok = true;
                if (t.op == kShflIdx) j = seg_lo | (b & (width - 1));
                else if (t.op == kShflUp) { j = lane - b; ok = j >= seg_lo; }
                else if (t.op == kShflDown) { j = lane + b; ok = j <= seg_hi; }
                else if (t.op == kShflXor) { j = lane ^ b; ok = j <= seg_hi; }
                if (!ok) j = lane;
                if (j >= (int)count || !(waiting >> j & 1u))
                    fail("warp %u: %s in lane %d reads lane %d, which does not take part "
                         "(mask 0x%08x); the GPU returns an undefined value there",
                         w, op_label(t), lane, j, t.mask);
                t.result = S.threads[base + (unsigned)j].value;
            }
        }
    }
    for (unsigned l = 0; l < count; ++l) {
        if (!(waiting >> l & 1u)) continue;
        S.threads[base + l].state = kReady;
        S.at_warp--;
    }
}

// Completes every warp collective all of whose lanes have arrived. Returns whether any did.
bool resolve_warps() {
    bool progressed = false;
    for (unsigned base = 0, w = 0; base < S.nthreads; base += 32, ++w) {
        const unsigned count = S.nthreads - base < 32 ? S.nthreads - base : 32;
        unsigned live = 0, waiting = 0, barrier = 0;
        for (unsigned l = 0; l < count; ++l) {
            const unsigned char st = S.threads[base + l].state;
            if (st != kExited) live |= 1u << l;
            if (st == kAtWarp) waiting |= 1u << l;
            if (st == kAtBarrier) barrier |= 1u << l;
        }
        if (!waiting || barrier) continue;  // lanes held at __syncthreads: a deadlock
        resolve_warp(w, base, count, live, waiting);
        progressed = true;
    }
    return progressed;
}

void release_barrier() {
    unsigned count = 0;
    for (unsigned i = 0; i < S.nthreads; ++i) {
        const Thread& t = S.threads[i];
        if (t.state == kAtBarrier && t.value != 0) ++count;
    }
    for (unsigned i = 0; i < S.nthreads; ++i) {
        Thread& t = S.threads[i];
        if (t.state != kAtBarrier) continue;
        switch (t.op) {
            case kBarCount: t.result = count; break;
            case kBarAnd: t.result = count == S.at_barrier; break;
            case kBarOr: t.result = count != 0; break;
            default: t.result = 0;
        }
        t.state = kReady;
    }
    S.at_barrier = 0;
}

[[noreturn]] void report_deadlock() {
    for (unsigned base = 0, w = 0; base < S.nthreads; base += 32, ++w) {
        const unsigned count = S.nthreads - base < 32 ? S.nthreads - base : 32;
        unsigned waiting = 0, barrier = 0;
        for (unsigned l = 0; l < count; ++l) {
            const unsigned char st = S.threads[base + l].state;
            if (st == kAtWarp) waiting |= 1u << l;
            if (st == kAtBarrier) barrier |= 1u << l;
        }
        if (waiting && barrier) {
            fail("deadlock in block (%u, %u, %u): in warp %u, lanes 0x%08x wait in %s while "
                 "lanes 0x%08x wait at __syncthreads",
                 g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, w, waiting,
                 op_label(S.threads[base + (unsigned)__builtin_ctz(waiting)]), barrier);
        }
    }
    fail("deadlock in block (%u, %u, %u): %u threads wait at barriers, %u in warp "
         "collectives, %u still running",
         g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, S.at_barrier, S.at_warp, S.live);
}

void run_block_fibers() {
    for (unsigned i = 0; i < S.nthreads; ++i) S.threads[i].state = kReady;
    S.live = S.nthreads;
    S.at_barrier = 0;
    S.at_warp = 0;
    for (;;) {
        for (unsigned i = 0; i < S.nthreads; ++i)
            if (S.threads[i].state == kReady) resume(i);
        if (S.live == 0) return;
        if (S.at_warp != 0 && resolve_warps()) continue;
        // A barrier opens when every thread that has not exited waits at it (threads that
        // returned early do not hold it shut).
        if (S.at_warp == 0 && S.at_barrier == S.live) {
            release_barrier();
            continue;
        }
        report_deadlock();
    }
}

// --- launch record -----------------------------------------------------------------------------
struct Reader {
    const unsigned char* p;
    const unsigned char* end;
    void need(size_t n) {
        if ((size_t)(end - p) < n) fail("truncated launch record");
    }
    template <typename T> T get() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    const unsigned char* take(size_t n) {
        need(n);
        const unsigned char* q = p;
        p += n;
        return q;
    }
};

// A list of pointers (layout above) at the reader's position: where it starts; the reader
// moves past it.
const unsigned char* skip_pointers(Reader& r) {
    const unsigned char* start = r.p;
    const unsigned n = r.get<unsigned>();
    r.take((size_t)n * 20);
    return start;
}

// Writes the pointers listed at `list` into `dst` (`size` bytes): each the address of a
// byte of a data buffer, or NULL.
void write_pointers(const unsigned char* list, const Buffer* bufs, unsigned nbuf,
                    unsigned char* dst, unsigned long long size) {
    Reader e{list, list + 4};
    const unsigned n = e.get<unsigned>();
    e.end = e.p + (size_t)n * 20;
    for (unsigned k = 0; k < n; ++k) {
        const unsigned long long at = e.get<unsigned long long>();
        const int idx = e.get<int>();
        const unsigned long long off = e.get<unsigned long long>();
        if (size < 8 || at > size - 8) fail("a pointer outside its record");
        unsigned long long value = 0;
        if (idx >= 0) {
            if ((unsigned)idx >= nbuf || bufs[idx].kind != 0 || off > bufs[idx].size)
                fail("bad pointer entry");
            value = (unsigned long long)(uintptr_t)(bufs[idx].data + off);
        }
        std::memcpy(dst + at, &value, 8);
    }
}

unsigned char* read_stdin(size_t* size) {
    size_t cap = 1 << 16, n = 0;
    unsigned char* buf = static_cast<unsigned char*>(std::malloc(cap));
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = static_cast<unsigned char*>(std::realloc(buf, cap));
        }
        ssize_t k = ::read(0, buf + n, cap - n);
        if (k < 0) fail("reading the launch record failed");
        if (k == 0) break;
        n += (size_t)k;
    }
    *size = n;
    return buf;
}

}  // namespace

// --- the scheduler interface emu_cuda.h declares -----------------------------------------------
void fail(const char* fmt, ...) {
    std::fflush(stdout);
    std::fputs("cupyprep emulator: error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
    print_context();
    std::_Exit(kExitEmulatorError);
}

int barrier(int op, int predicate) {
    if (!S.fibers)
        fail("__syncthreads reached in a launch without fibers; the source scan should have "
             "seen it (is it hidden behind a function pointer?)");
    Thread& t = S.threads[S.current];
    t.state = kAtBarrier;
    t.op = op;
    t.op_name = "__syncthreads";
    t.value = predicate != 0;
    S.at_barrier++;
    yield_to_scheduler();
    return (int)t.result;
}

unsigned long long warp_op(int op, const char* name, unsigned mask, unsigned long long value,
                           int arg, int width) {
    if (!S.fibers)
        fail("%s reached in a launch without fibers; the source scan should have seen it", name);
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fail("%s: width %d is not a power of two from 1 to 32", name, width);
    Thread& t = S.threads[S.current];
    const unsigned lane = S.current & 31u;
    if (!(mask >> lane & 1u))
        fail("%s called by lane %u with mask 0x%08x, which does not include the lane", name, lane,
             mask);
    t.state = kAtWarp;
    t.op = op;
    t.op_name = name;
    t.mask = mask;
    t.value = value;
    t.arg = arg;
    t.width = width;
    S.at_warp++;
    yield_to_scheduler();
    return t.result;
}

unsigned active_mask() {
    if (!S.fibers) fail("__activemask reached in a launch without fibers");
    const unsigned base = S.current & ~31u;
    const unsigned count = S.nthreads - base < 32 ? S.nthreads - base : 32;
    unsigned m = 0;
    for (unsigned l = 0; l < count; ++l)
        if (S.threads[base + l].state != kExited) m |= 1u << l;
    return m;
}


namespace {
int g_out_fd = -1;
}  // namespace

void** load_launch(size_t nparams, const size_t* sizes, const bool* is_ptr) {
    // Results go to the original stdout; kernel printf output joins stderr.
    g_out_fd = dup(1);
    dup2(2, 1);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::signal(SIGABRT, on_fatal_signal);
#if CUPYPREP_EMU_ASAN
    __sanitizer_set_death_callback(on_sanitizer_death);
#else
    (void)on_sanitizer_death;
    static char altstack[1 << 16];
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    sigaction(SIGFPE, &sa, nullptr);
#endif

    size_t in_size = 0;
    unsigned char* input = read_stdin(&in_size);
    Reader r{input, input + in_size};
    if (std::memcmp(r.take(8), "CPEMU01\0", 8) != 0) fail("bad launch record header");
    const unsigned gx = r.get<unsigned>(), gy = r.get<unsigned>(), gz = r.get<unsigned>();
    const unsigned bx = r.get<unsigned>(), by = r.get<unsigned>(), bz = r.get<unsigned>();
    const unsigned mode = r.get<unsigned>();
    const unsigned stack_kib = r.get<unsigned>();
    const unsigned nbuf = r.get<unsigned>();
    const unsigned nparam_in = r.get<unsigned>();

    Buffer* bufs = static_cast<Buffer*>(std::calloc(nbuf + 1, sizeof(Buffer)));
    // Where each kind 1 buffer's pointers sit in the record; resolved once every buffer exists.
    const unsigned char** buffer_pointers =
        static_cast<const unsigned char**>(std::calloc(nbuf + 1, sizeof(unsigned char*)));
    for (unsigned b = 0; b < nbuf; ++b) {
        Buffer& B = bufs[b];
        B.kind = r.get<unsigned>();
        B.size = r.get<unsigned long long>();
        B.pad = r.get<unsigned long long>();
        if (B.pad >= 256) fail("bad alignment offset");
        void* raw = nullptr;
        if (posix_memalign(&raw, 256, (size_t)(B.pad + B.size)) != 0 || raw == nullptr)
            fail("could not allocate a buffer of %llu bytes", B.size);
#if CUPYPREP_EMU_ASAN
        // Bytes before the array stand in for the allocation's alignment; keep them off
        // limits (to the 8-byte granularity AddressSanitizer tracks).
        ASAN_POISON_MEMORY_REGION(raw, (size_t)(B.pad & ~7ull));
#endif
        B.data = static_cast<unsigned char*>(raw) + B.pad;
        if (B.kind > 1) fail("bad buffer kind %u", B.kind);
        std::memcpy(B.data, r.take((size_t)B.size), (size_t)B.size);
        if (B.kind == 1) buffer_pointers[b] = skip_pointers(r);
    }
    for (unsigned b = 0; b < nbuf; ++b)
        if (bufs[b].kind == 1) write_pointers(buffer_pointers[b], bufs, nbuf, bufs[b].data, bufs[b].size);

    if (nparam_in != nparams)
        fail("the kernel takes %zu parameters, the launch passed %u", nparams, nparam_in);
    void** params = static_cast<void**>(std::calloc(nparams + 1, sizeof(void*)));
    for (unsigned i = 0; i < nparams; ++i) {
        const unsigned kind = r.get<unsigned>();
        const unsigned size = r.get<unsigned>();
        if (size != sizes[i])
            fail("parameter %u: the kernel expects %zu bytes, the launch passed %u", i, sizes[i],
                 size);
        void* slot = nullptr;
        if (posix_memalign(&slot, 64, size ? size : 1) != 0) fail("out of memory");
        if (kind == 0 || kind == 3) {
            std::memcpy(slot, r.take(size), size);
            if (kind == 3) {
                if (is_ptr[i]) fail("parameter %u: records passed where the kernel takes a pointer", i);
                write_pointers(skip_pointers(r), bufs, nbuf, static_cast<unsigned char*>(slot), size);
            }
        } else {
            if (!is_ptr[i]) fail("parameter %u: a pointer passed where the kernel takes a value", i);
            void* p = nullptr;
            if (kind == 1) {
                const int idx = r.get<int>();
                const unsigned long long off = r.get<unsigned long long>();
                if (idx < 0 || (unsigned)idx >= nbuf || off > bufs[idx].size)
                    fail("parameter %u: bad buffer reference", i);
                p = bufs[idx].data + off;
            }
            std::memcpy(slot, &p, sizeof p);
        }
        params[i] = slot;
    }

    g_gridDim = dim3(gx, gy, gz);
    g_blockDim = dim3(bx, by, bz);
    S.fibers = mode == 1;
    S.nthreads = bx * by * bz;
    S.stack_size = (size_t)stack_kib * 1024;
    S.buffers = bufs;
    S.nbuffers = nbuf;
    return params;
}

int run_launch(void (*invoke)()) {
    S.invoke = invoke;
    S.running = true;
    const dim3 grid = g_gridDim, block = g_blockDim;
    if (S.fibers) {
        S.threads = static_cast<Thread*>(std::calloc(S.nthreads, sizeof(Thread)));
        unsigned i = 0;
        for (unsigned z = 0; z < block.z; ++z)
            for (unsigned y = 0; y < block.y; ++y)
                for (unsigned x = 0; x < block.x; ++x) S.threads[i++].idx = uint3{x, y, z};
        make_fibers();
        for (unsigned z = 0; z < grid.z; ++z)
            for (unsigned y = 0; y < grid.y; ++y)
                for (unsigned x = 0; x < grid.x; ++x) {
                    g_blockIdx = uint3{x, y, z};
                    run_block_fibers();
                }
    } else {
        S.in_thread = true;
        for (unsigned z = 0; z < grid.z; ++z)
            for (unsigned y = 0; y < grid.y; ++y)
                for (unsigned x = 0; x < grid.x; ++x) {
                    g_blockIdx = uint3{x, y, z};
                    unsigned i = 0;
                    for (unsigned tz = 0; tz < block.z; ++tz)
                        for (unsigned ty = 0; ty < block.y; ++ty)
                            for (unsigned tx = 0; tx < block.x; ++tx) {
                                g_threadIdx = uint3{tx, ty, tz};
                                S.current = i++;
                                invoke();
                            }
                }
    }
    S.running = false;
    S.in_thread = false;
    std::fflush(stdout);

    for (unsigned b = 0; b < S.nbuffers; ++b)
        if (S.buffers[b].kind == 0)
            write_all(g_out_fd, S.buffers[b].data, (size_t)S.buffers[b].size);
    close(g_out_fd);
    return 0;
}

}  // namespace cupyprep_emu
#endif  // runtime

#if !defined(CUPYPREP_EMU_RUNNER_PART) || CUPYPREP_EMU_RUNNER_PART == 2
// ============================== per-kernel part =======================================
namespace cupyprep_emu {
namespace {

template <typename T> const char* type_name() { return __PRETTY_FUNCTION__; }

template <typename T> char kind_of() {
    if (std::is_pointer<T>::value) return 'p';
    if (std::is_same<T, bool>::value) return 'b';
    if (std::is_floating_point<T>::value) return 'f';
    if (std::is_integral<T>::value) return std::is_signed<T>::value ? 'i' : 'u';
    if (std::is_enum<T>::value) return 'e';
    if (std::is_void<T>::value) return 'v';
    if (std::is_class<T>::value || std::is_union<T>::value) return 'c';
    return 'x';
}

template <typename T> struct SizeOrZero { static constexpr size_t value = sizeof(T); };
template <> struct SizeOrZero<void> { static constexpr size_t value = 0; };
template <> struct SizeOrZero<const void> { static constexpr size_t value = 0; };
template <> struct SizeOrZero<volatile void> { static constexpr size_t value = 0; };
template <> struct SizeOrZero<const volatile void> { static constexpr size_t value = 0; };

template <typename T> void describe_param(FILE* f) {
    using P = typename std::remove_cv<typename std::remove_pointer<T>::type>::type;
    const bool ptr = std::is_pointer<T>::value;
    std::fprintf(f, "%zu %zu %c %c %zu %s\n", sizeof(T), alignof(T), kind_of<T>(),
                 ptr ? kind_of<P>() : '-', ptr ? SizeOrZero<P>::value : (size_t)0,
                 type_name<T>());
}

template <typename... A, size_t... I>
inline void call(void (*kernel)(A...), void** params, std::index_sequence<I...>) {
    kernel(*static_cast<A*>(params[I])...);
}

template <typename... A> struct Bound {
    static void (*kernel)(A...);
    static void** params;
    static void invoke() { call(kernel, params, std::index_sequence_for<A...>{}); }
};
template <typename... A> void (*Bound<A...>::kernel)(A...) = nullptr;
template <typename... A> void** Bound<A...>::params = nullptr;

}  // namespace

template <typename... A> int runner_main(int argc, char** argv, void (*kernel)(A...)) {
    constexpr size_t nparams = sizeof...(A);
    if (argc > 1 && std::strcmp(argv[1], "--describe") == 0) {
        std::printf("cupyprep-emulator-signature %zu\n", nparams);
        int expand[] = {0, (describe_param<A>(stdout), 0)...};
        (void)expand;
        std::fflush(stdout);
        return 0;
    }
    const size_t sizes[] = {sizeof(A)..., 0};
    const bool is_ptr[] = {std::is_pointer<A>::value..., false};
    Bound<A...>::kernel = kernel;
    Bound<A...>::params = load_launch(nparams, sizes, is_ptr);
    return run_launch(&Bound<A...>::invoke);
}

}  // namespace cupyprep_emu
#endif  // per-kernel part
