// embed_cycle.cpp — the C++17 twin of embed_cycle.c (issue 8): an inference server
// written in C++ embeds Fluxon from the amalgamation alone (fluxon.c compiled as C,
// fluxon.h included from C++). Starts an embedded master and owner, opens two clients
// from two std::threads and runs the hostless cycle on 64 keys in each (put_start →
// write in place → commit → future wait → get_start → get_transfer → verify →
// release_views), then, after a barrier, reads the other thread's keys. Exit 0 on success.
//
// usage: embed_cycle_cpp [DIR]   (the owner's socket goes into a mkdtemp directory in DIR)
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "fluxon.h"

namespace {

constexpr int kKeys = 64;
constexpr uint64_t kValueLen = 8192;
constexpr uint32_t kWaitMs = 20000;

struct Error : std::runtime_error {
    Error(const std::string &what, int status)
        : std::runtime_error(what + ": " + fluxon_status_string(status)) {}
    explicit Error(const std::string &what) : std::runtime_error(what) {}
};

void check(int status, const std::string &what)
{
    if (status != FLUXON_OK) throw Error(what, status);
}

// C++17 has no std::barrier; a one-shot one is enough here.
class Barrier {
public:
    explicit Barrier(int n) : left_(n) {}
    void arrive_and_wait()
    {
        std::unique_lock<std::mutex> lk(mu_);
        if (--left_ == 0) cv_.notify_all();
        else cv_.wait(lk, [this] { return left_ == 0; });
    }
private:
    std::mutex mu_;
    std::condition_variable cv_;
    int left_;
};

struct ClientDeleter {
    void operator()(fluxon_client *c) const { fluxon_client_close(c); }
};
struct NodeDeleter {
    void operator()(fluxon_node *n) const { fluxon_node_stop(n); }
};
struct FutureDeleter {
    void operator()(fluxon_future *f) const { fluxon_future_free(f); }
};
using Client = std::unique_ptr<fluxon_client, ClientDeleter>;
using Node = std::unique_ptr<fluxon_node, NodeDeleter>;
using Future = std::unique_ptr<fluxon_future, FutureDeleter>;

uint8_t pattern(int thread, int key, size_t j)
{
    return static_cast<uint8_t>(thread * 89 + key * 37 + static_cast<int>(j * 5) + static_cast<int>(j >> 9));
}

std::vector<std::string> key_names(int thread)
{
    std::vector<std::string> names;
    for (int i = 0; i < kKeys; i++) names.push_back("embed-cpp/t" + std::to_string(thread) + "/page-" + std::to_string(i));
    return names;
}

std::vector<const char *> key_ptrs(const std::vector<std::string> &names)
{
    std::vector<const char *> keys;
    for (const auto &n : names) keys.push_back(n.c_str());
    return keys;
}

void check_in_segment(const fluxon_segment_info &seg, uint64_t p)
{
    uint64_t base = reinterpret_cast<uintptr_t>(seg.write_ptr);
    if (p < base || p + kValueLen > base + seg.len) throw Error("value pointer outside the owner's segment");
}

void put_cycle(fluxon_client *c, const fluxon_segment_info &seg, int thread)
{
    auto names = key_names(thread);
    auto keys = key_ptrs(names);
    std::vector<int> status(kKeys, -1);
    fluxon_plan *plan = nullptr;
    check(fluxon_local_fast_put_start(c, keys.data(), keys.size(), kValueLen, nullptr, &plan, status.data()),
          "put_start");
    if (plan->magic != FLUXON_PUT_PLAN_MAGIC || plan->count != kKeys) throw Error("bad put plan");
    for (int i = 0; i < kKeys; i++) {
        check(status[i], "put_start key " + names[i]);
        check_in_segment(seg, plan->value_ptrs[i]);
        auto *dst = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(plan->value_ptrs[i]));
        for (size_t j = 0; j < kValueLen; j++) dst[j] = pattern(thread, i, j);
    }
    fluxon_future *raw = nullptr;
    check(fluxon_local_fast_put_commit(c, plan, &raw), "commit");
    Future f(raw);
    check(fluxon_future_wait(f.get(), kWaitMs), "future_wait");
}

void get_cycle(fluxon_client *c, const fluxon_segment_info &seg, int thread)
{
    auto names = key_names(thread);
    auto keys = key_ptrs(names);
    fluxon_get_handle *h = nullptr;
    fluxon_get_start_result res{};
    check(fluxon_get_start(c, keys.data(), keys.size(), 0, nullptr, 0, &h, &res), "get_start");
    if (!res.all_hit || res.transferable_len != kKeys || res.first_miss_index != -1)
        throw Error("get_start of thread " + std::to_string(thread) + ": not all hit (transferable " +
                    std::to_string(res.transferable_len) + ")");
    fluxon_plan *plan = nullptr;
    check(fluxon_get_transfer(c, h, 0, &plan), "get_transfer");
    if (plan->magic != FLUXON_READ_PLAN_MAGIC || plan->count != kKeys) throw Error("bad read plan");
    for (int i = 0; i < kKeys; i++) {
        check_in_segment(seg, plan->value_ptrs[i]);
        const auto *src = reinterpret_cast<const uint8_t *>(static_cast<uintptr_t>(plan->value_ptrs[i]));
        for (size_t j = 0; j < kValueLen; j++)
            if (src[j] != pattern(thread, i, j))
                throw Error(names[i] + ": byte " + std::to_string(j) + " differs");
    }
    check(fluxon_release_views(c, plan), "release_views");
}

}  // namespace

int main(int argc, char **argv)
{
    std::string tmpl = std::string(argc > 1 ? argv[1] : "/tmp") + "/fluxon-embed-XXXXXX";
    std::vector<char> dir(tmpl.begin(), tmpl.end());
    dir.push_back('\0');
    if (!mkdtemp(dir.data())) {
        std::perror("mkdtemp");
        return 1;
    }
    const std::string sock_dir(dir.data()), sock = sock_dir + "/owner.sock";
    std::printf("fluxon %s (header %s)\n", fluxon_version(), FLUXON_VERSION_STRING);

    int fail = 0;
    try {
        fluxon_node *raw = nullptr;
        check(fluxon_node_start(R"({"role":"master","cluster_id":"embed","cluster_token":"tok",)"
                                R"("listen":"127.0.0.1:0","log_level":"warn"})", &raw), "master start");
        Node master(raw);
        if (fluxon_node_port(master.get()) == 0) throw Error("master port is 0");
        std::string owner_cfg = R"({"role":"owner","cluster_id":"embed","cluster_token":"tok",)"
                                R"("node_id":"embed-owner-cpp","master":"127.0.0.1:)" +
                                std::to_string(fluxon_node_port(master.get())) + R"(","socket":")" + sock +
                                R"(","segment_bytes":"32MiB","reserve":{"grant_bytes":"4MiB"},)"
                                R"("log_level":"warn","start_timeout_ms":20000})";
        raw = nullptr;
        check(fluxon_node_start(owner_cfg.c_str(), &raw), "owner start");
        Node owner(raw);

        const std::string client_cfg = R"({"role":"external","cluster_id":"embed","cluster_token":"tok",)"
                                       R"("socket":")" + sock + R"(","timeout_ms":20000,"log_level":"warn"})";
        Barrier barrier(2);
        std::string errors[2];
        std::vector<std::thread> threads;
        for (int t = 0; t < 2; t++)
            threads.emplace_back([&, t] {
                bool arrived = false;
                try {
                    fluxon_client *rc = nullptr;
                    check(fluxon_client_open(client_cfg.c_str(), &rc), "client_open");
                    Client c(rc);
                    fluxon_segment_info seg{};
                    size_t n = 0;
                    check(fluxon_wait_local_segments_ready(c.get(), kWaitMs, &seg, 1, &n), "segments");
                    if (n != 1) throw Error("expected one segment");
                    put_cycle(c.get(), seg, t);
                    get_cycle(c.get(), seg, t);
                    arrived = true;
                    barrier.arrive_and_wait();
                    get_cycle(c.get(), seg, 1 - t);
                } catch (const std::exception &e) {
                    errors[t] = e.what();
                    if (!arrived) barrier.arrive_and_wait();
                }
            });
        for (auto &th : threads) th.join();
        for (int t = 0; t < 2; t++)
            if (!errors[t].empty()) {
                std::fprintf(stderr, "embed_cycle (C++) thread %d: %s\n", t, errors[t].c_str());
                fail = 1;
            }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "embed_cycle (C++): %s\n", e.what());
        fail = 1;
    }
    unlink(sock.c_str());
    rmdir(sock_dir.c_str());
    if (!fail) std::printf("embed cycle ok (C++): 2 threads x %d keys x %" PRIu64 " bytes\n", kKeys, kValueLen);
    return fail;
}
