-- The load of bench/serve, for wrk (https://github.com/wg/wrk): one GraphQL `allocate`
-- mutation per HTTP request on keep-alive connections. Each request names an owner never
-- seen before (`VirtualMachine/<prefix>-<thread>-<n>/0`), or with BENCH_OWNER always that one
-- owner (a re-ask). A thread stops after BENCH_QUOTA answers (0: when wrk's -d ends), and
-- then creates BENCH_DONE_DIR/<thread>.
-- Prints, after wrk's own summary, one `key value` line per figure bench/serve reads.
local quota = tonumber(os.getenv("BENCH_QUOTA") or "0")
local prefix = os.getenv("BENCH_PREFIX") or "w"
local namespace = os.getenv("BENCH_NS")
local pool = os.getenv("BENCH_POOL")
local fixed = os.getenv("BENCH_OWNER")
local done_dir = os.getenv("BENCH_DONE_DIR")
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_usec; } bench_timeval;
int gettimeofday(bench_timeval *tv, void *tz);
]]
local function now_us()
    local tv = ffi.new("bench_timeval")
    ffi.C.gettimeofday(tv, nil)
    return tonumber(tv.tv_sec) * 1000000 + tonumber(tv.tv_usec)
end
local threads = {}
local next_id = 0

function setup(thread)
    thread:set("tid", next_id)
    next_id = next_id + 1
    table.insert(threads, thread)
end

function init(args)
    sent, answered, failed, first_us, last_us = 0, 0, 0, 0, 0
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
end

function request()
    if sent == 0 then
        first_us = now_us()
    end
    sent = sent + 1
    local owner = fixed or string.format("VirtualMachine/%s-%d-%d/0", prefix, tid, sent)
    local body = string.format(
        '{"query":"mutation($i: AllocateInput!) { allocate(input: $i) { addresses action } }",'
            .. '"variables":{"i":{"namespace":"%s","pool":"%s","owner":"%s"}}}',
        namespace, pool, owner)
    return wrk.format(nil, "/graphql", nil, body)
end

function response(status, headers, body)
    answered = answered + 1
    -- A claim is answered only with its address: any error, or no address, is a failure.
    if status ~= 200 or string.find(body, '"errors"', 1, true)
        or not string.find(body, '"addresses":["', 1, true) then
        failed = failed + 1
    end
    if quota > 0 and answered == quota then
        -- wrk runs until -d ends whatever its threads do: the thread's own clock says when its
        -- share was answered, and a file tells bench/serve to end wrk (SIGINT) once all are.
        last_us = now_us()
        wrk.thread:stop()
        if done_dir then
            io.open(string.format("%s/%d", done_dir, tid), "w"):close()
        end
    end
end

function done(summary, latency, requests)
    local a, f, first, last = 0, 0, math.huge, 0
    for _, t in ipairs(threads) do
        a = a + t:get("answered")
        f = f + t:get("failed")
        first = math.min(first, t:get("first_us"))
        last = math.max(last, t:get("last_us"))
    end
    io.write(string.format("bench answered %d\n", a))
    io.write(string.format("bench failed %d\n", f))
    if quota > 0 then
        io.write(string.format("bench duration_us %d\n", last - first))
    else
        io.write(string.format("bench duration_us %d\n", summary.duration))
    end
    io.write(string.format("bench p50_us %d\n", latency:percentile(50)))
    io.write(string.format("bench p99_us %d\n", latency:percentile(99)))
end
