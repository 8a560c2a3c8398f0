#!/usr/bin/env python3
"""The gateway's output loop, Rust against Python, on the same traffic.

Three roles, one file (run through bench/runner-compare.sh):

  source   a fake EngineCore that pushes pre-encoded EngineCoreOutputs
           batches over a pyzmq PUSH socket as fast as the reader takes them.
           The batches are built once, before any timing, with vLLM's own
           MsgpackEncoder: `shape` outputs of one token each, request ids
           spread round-robin over N in-flight requests, weight_version
           "default", a timestamp, nothing else (the decode step of
           output/batch_64 in docs/bench.md, without finishes). With
           --handshake it is an engine: HELLO /
           INIT / registration / READY as vLLM 0.32's EngineCoreProc does,
           then it reads the gateway's N ADDs (checking their ids) before
           pushing. With --connect it dials a PULL directly.
           Commands on stdin, one per line: `push <shape> <count>`.

  consume  the Python loop: binds a PULL on ipc, starts a `source` on it, and
           for each command `decode <shape> <count>` on stdin times
           recv_multipart(copy=False) + vLLM's MsgpackDecoder(EngineCoreOutputs)
           + demultiplex into a dict request_id -> list, as vLLM's
           process_outputs_socket does; `recv <shape> <count>` times the
           receive alone. Answers `<shape> <count> <outputs> <wall_ns>
           <cpu_ns>` (CPU time of this process, libzmq's I/O thread
           included), as the Rust side does.

  compare  the driver: starts the Rust side (the gpu-runner bench binary in
           --serve mode, which runs the gateway's transport against its own
           `source`) and the Python `consume`, interleaves them shape by
           shape over several rounds, and prints a Markdown table.

Both readers see byte-identical batches from the same kind of source; each
times from writing the command to its source to the last output delivered.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

MASK = (1 << 64) - 1
ENGINE_CORE_DEAD = b"ENGINE_CORE_DEAD"


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def request_ids(n):
    """Request ids shaped like the OpenAI frontend's (`chatcmpl-` + 32 hex);
    gpu_runner/benches/runner_loop.rs derives the same list."""
    return [f"chatcmpl-{splitmix64(2 * i):016x}{splitmix64(2 * i + 1):016x}" for i in range(n)]


def token(p):
    return 10 + (p * 7919) % 151_000


def build_pool(shape, n_requests, pool):
    """`pool` distinct batches of `shape` outputs, vLLM's bytes."""
    from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs
    from vllm.v1.serial_utils import MsgpackEncoder

    enc = MsgpackEncoder()
    ids = request_ids(n_requests)
    frames = []
    for k in range(pool):
        outs = [
            EngineCoreOutput(request_id=ids[(k * shape + j) % n_requests], new_token_ids=[token(k * shape + j)])
            for j in range(shape)
        ]
        batch = EngineCoreOutputs(engine_index=0, outputs=outs, timestamp=12_345.0 + k / 64, weight_version="default")
        bufs = enc.encode(batch)
        assert len(bufs) == 1, "no aux frames expected"
        frames.append(bytes(bufs[0]))
    return frames


def shapes_arg(s):
    return [int(x) for x in s.split(",") if x]


# --------------------------------------------------------------------------
# source


def engine_handshake(ctx, zmq, endpoint, n_requests):
    """The engine side of vLLM 0.32's startup handshake (EngineCoreProc),
    then the gateway's N ADDs. Returns the PUSH socket."""
    import msgspec
    from vllm.v1.engine import EngineCoreReadyResponse, EngineCoreRequest
    from vllm.v1.serial_utils import MsgpackDecoder

    identity = (0).to_bytes(2, "little")
    hs = ctx.socket(zmq.DEALER)
    hs.setsockopt(zmq.IDENTITY, identity)
    hs.connect(endpoint)
    hs.send(msgspec.msgpack.encode({"status": "HELLO", "local": False, "headless": True}))
    init = msgspec.msgpack.decode(hs.recv())
    inputs, outputs = init["addresses"]["inputs"], init["addresses"]["outputs"]
    inp = ctx.socket(zmq.DEALER)
    inp.setsockopt(zmq.IDENTITY, identity)
    inp.connect(inputs[0])
    push = ctx.socket(zmq.PUSH)
    push.connect(outputs[0])
    ready = EngineCoreReadyResponse(
        max_model_len=4096, num_gpu_blocks=8192, block_size=16, dp_stats_address=None, dtype="bfloat16",
        vllm_version="0.32.0", world_size=1, data_parallel_size=1, tensor_parallel_size=1,
        pipeline_parallel_size=1, decode_context_parallel_size=1, data_parallel_rank=0, max_num_seqs=n_requests,
        max_num_batched_tokens=8192, instance_id="bench-source", supports_lora=False, max_loras=0)
    inp.send(msgspec.msgpack.encode(ready))
    hs.send(msgspec.msgpack.encode({"status": "READY", "local": False, "headless": True}))
    dec = MsgpackDecoder(EngineCoreRequest)
    want = set(request_ids(n_requests))
    got = set()
    while len(got) < n_requests:
        frames = inp.recv_multipart()
        if frames[0] != b"\x00":
            continue  # only ADDs are expected; anything else is ignored
        got.add(dec.decode(frames[1:]).request_id)
    if got != want:
        sys.exit(f"source: the gateway's ADDs carry other request ids than bench/runner_loop.py derives: "
                 f"{sorted(got - want)[:3]}")
    return push, (hs, inp)


def source(args):
    import zmq

    pools = {s: build_pool(s, args.requests, args.pool) for s in shapes_arg(args.shapes)}
    ctx = zmq.Context()
    keep = ()
    if args.handshake:
        push, keep = engine_handshake(ctx, zmq, args.handshake, args.requests)
    else:
        push = ctx.socket(zmq.PUSH)
        push.connect(args.connect)
    print("ready", flush=True)
    send = push.send
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] != "push":
            sys.exit(f"source: unknown command {line!r}")
        frames = pools[int(words[1])]
        count = int(words[2])
        p = len(frames)
        full, rest = divmod(count, p)
        for _ in range(full):
            for f in frames:
                send(f)
        for f in frames[:rest]:
            send(f)
    push.close(linger=1000)
    del keep


# --------------------------------------------------------------------------
# consume (the Python loop)


def consume(args):
    import zmq
    from vllm.v1.engine import EngineCoreOutputs
    from vllm.v1.serial_utils import MsgpackDecoder

    ctx = zmq.Context()
    tmp = tempfile.mkdtemp(prefix="runner-loop-py-")
    endpoint = f"ipc://{tmp}/out-0.sock"
    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint)
    src = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "source", "--connect", endpoint, "--shapes", args.shapes,
         "--requests", str(args.requests), "--pool", str(args.pool)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if src.stdout.readline().strip() != "ready":
        sys.exit("consume: the source did not start")
    decoder = MsgpackDecoder(EngineCoreOutputs)
    streams = {rid: [] for rid in request_ids(args.requests)}
    # What `vllm serve` does once started (server_utils.py): the startup
    # heap leaves the garbage collector's view.
    from vllm.utils.gc_utils import freeze_gc_heap

    freeze_gc_heap()
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            mode, shape, count = words[0], int(words[1]), int(words[2])
            recv = pull.recv_multipart
            n_out = orphans = held = 0
            c0 = time.process_time_ns()  # this process: the loop and libzmq's I/O thread
            t0 = time.perf_counter_ns()
            src.stdin.write(f"push {shape} {count}\n")
            src.stdin.flush()
            if mode == "recv":
                for _ in range(count):
                    recv(copy=False)
            elif mode == "decode":
                decode = decoder.decode
                get = streams.get
                for _ in range(count):
                    frames = recv(copy=False)
                    # resources.validate_alive(frames)
                    if len(frames) == 1 and frames[0].buffer == ENGINE_CORE_DEAD:
                        sys.exit("consume: engine dead")
                    outputs = decode(frames)
                    if outputs.utility_output:
                        continue
                    for o in outputs.outputs:
                        s = get(o.request_id)
                        if s is None:
                            orphans += 1
                        else:
                            s.append(o)
                    n_out += len(outputs.outputs)
                    if n_out >= held + 4096:
                        # The requests' readers take their outputs (at most
                        # 4096 outputs are held, as a server's would be).
                        held = n_out
                        for s in streams.values():
                            s.clear()
            else:
                sys.exit(f"consume: unknown command {line!r}")
            elapsed = time.perf_counter_ns() - t0
            cpu = time.process_time_ns() - c0
            for s in streams.values():
                s.clear()
            if orphans:
                sys.exit(f"consume: {orphans} outputs for unknown request ids")
            print(f"{shape} {count} {n_out} {elapsed} {cpu}", flush=True)
    finally:
        src.stdin.close()
        src.wait(timeout=10)
        pull.close(linger=0)
        try:
            os.unlink(f"{tmp}/out-0.sock")
        except FileNotFoundError:
            pass
        os.rmdir(tmp)


# --------------------------------------------------------------------------
# compare (the driver)


class Side:
    def __init__(self, name, argv):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_ready(self):
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"{self.name} did not start (said {line!r})")

    def run(self, cmd, shape, count):
        self.proc.stdin.write(f"{cmd} {shape} {count}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        if len(line) != 5:
            raise SystemExit(f"{self.name}: unexpected answer {line!r}")
        s, c, n_out, wall_ns, cpu_ns = map(int, line)
        if (s, c) != (shape, count) or (cmd != "recv" and n_out != shape * count):
            raise SystemExit(f"{self.name}: {shape}x{count} delivered {n_out} outputs")
        return count / (wall_ns / 1e9), cpu_ns / 1e3 / count  # batches per second, CPU us per batch

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def compare(args):
    import msgspec
    import zmq

    shapes = shapes_arg(args.shapes)
    counts = {s: max(200, int(args.outputs / (s + args.per_batch_weight))) for s in shapes}
    common = ["--shapes", args.shapes, "--requests", str(args.requests), "--pool", str(args.pool)]
    rust_like = [("rust", args.rust)] + [tuple(v.split("=", 1)) for v in args.variant]
    sides = {name: Side(name, [path, "--serve", "--python", sys.executable, "--script", os.path.abspath(__file__),
                               *common]) for name, path in rust_like}
    sides["python"] = Side("python", [sys.executable, os.path.abspath(__file__), "consume", *common])
    for side in sides.values():
        side.wait_ready()
    names = list(sides)
    # per (side, shape): [(batches/s, CPU us per batch)] over rounds
    runs = {(n, s): [] for n in names + ["recv-only"] for s in shapes}
    try:
        for s in shapes:  # warm-up
            for side in sides.values():
                side.run("decode", s, counts[s] // 4)
        for r in range(args.rounds):
            for s in shapes:
                # Rotate who goes first: no side always runs right after
                # the same other one.
                k = (r + shapes.index(s)) % len(names)
                got = {n: sides[n].run("decode", s, counts[s]) for n in names[k:] + names[:k]}
                for n, v in got.items():
                    runs[(n, s)].append(v)
                if args.ceiling:
                    runs[("recv-only", s)].append(sides["python"].run("recv", s, counts[s]))
                print(f"round {r + 1}/{args.rounds} batch {s}: "
                      + ", ".join(f"{n} {got[n][0]:,.0f}/s {got[n][1]:.2f}us" for n in names),
                      file=sys.stderr, flush=True)
    finally:
        for side in sides.values():
            side.close()

    import vllm

    med = statistics.median

    def rate(n, s):
        return med(v[0] for v in runs[(n, s)])

    def cpu(n, s):
        return med(v[1] for v in runs[(n, s)])

    def ratio(n, s, i):
        # per round, Rust-side figure over Python's (for CPU: Python's over Rust's)
        xs = [(a[0] / b[0]) if i == 0 else (b[1] / a[1]) for a, b in zip(runs[(n, s)], runs[("python", s)])]
        return f"{med(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})"

    print(f"vLLM {vllm.__version__}, msgspec {msgspec.__version__}, pyzmq {zmq.__version__} (libzmq "
          f"{zmq.zmq_version()}), Python {sys.version.split()[0]}; {args.requests} requests in flight; "
          f"{args.rounds} interleaved rounds; figures are medians over rounds, a ratio is the median "
          f"(min-max) of the per-round ratios; CPU: user+system time of the reading process per batch")
    print()
    head = ("| batch | batches per run | Rust: batches/s | Rust: outputs/s | Python: batches/s | Python: outputs/s "
            "| Rust / Python | CPU per batch: Rust | CPU per batch: Python | Python CPU / Rust CPU |")
    sep = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if args.ceiling:
        head += " pyzmq recv only: batches/s |"
        sep += "---:|"
    print(head)
    print(sep)
    for s in shapes:
        r, p = rate("rust", s), rate("python", s)
        row = (f"| {s} | {counts[s]:,} | {r:,.0f} | {r * s:,.0f} | {p:,.0f} | {p * s:,.0f} | **{ratio('rust', s, 0)}** "
               f"| {cpu('rust', s):.2f} us | {cpu('python', s):.2f} us | {ratio('rust', s, 1)} |")
        if args.ceiling:
            row += f" {rate('recv-only', s):,.0f} |"
        print(row)
    if len(rust_like) > 1:
        print()
        print("| build | " + " | ".join(f"batch {s}: batches/s, / Python | batch {s}: CPU per batch, Python / it"
                                       for s in shapes) + " |")
        print("|---|" + "---:|---:|" * len(shapes))
        for n, _ in rust_like + [("python", None)]:
            cells = []
            for s in shapes:
                if n == "python":
                    cells.append(f"{rate(n, s):,.0f} | {cpu(n, s):.2f} us")
                else:
                    cells.append(f"{rate(n, s):,.0f}, {ratio(n, s, 0)} | {cpu(n, s):.2f} us, {ratio(n, s, 1)}")
            print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    for n, _ in rust_like:
        worst = min(med((a[0] / b[0]) for a, b in zip(runs[(n, s)], runs[("python", s)])) for s in shapes)
        print(f"{n}: lowest median throughput ratio {worst:.2f}x (goal: 2x)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="role", required=True)
    for name in ("source", "consume", "compare"):
        p = sub.add_parser(name)
        p.add_argument("--shapes", default="1,32,128", help="outputs per batch, comma-separated")
        p.add_argument("--requests", type=int, default=256, help="requests in flight")
        p.add_argument("--pool", type=int, default=256, help="distinct pre-encoded batches per shape")
        if name == "source":
            g = p.add_mutually_exclusive_group(required=True)
            g.add_argument("--handshake", help="be an engine: dial this handshake ROUTER (tcp://...)")
            g.add_argument("--connect", help="push straight to this PULL (ipc://...)")
        if name == "compare":
            p.add_argument("--rust", required=True, help="the gpu-runner bench binary (benches/runner_loop.rs)")
            p.add_argument("--rounds", type=int, default=7)
            p.add_argument("--outputs", type=float, default=1_000_000,
                           help="size of one run: batches = outputs / (shape + per-batch-weight)")
            p.add_argument("--per-batch-weight", type=float, default=4.0)
            p.add_argument("--ceiling", action="store_true", help="also time the receive alone (pyzmq PULL)")
            p.add_argument("--variant", action="append", default=[], metavar="NAME=BIN",
                           help="another build of the bench binary (e.g. a patched transport), interleaved too")
    args = ap.parse_args()
    {"source": source, "consume": consume, "compare": compare}[args.role](args)


if __name__ == "__main__":
    main()
