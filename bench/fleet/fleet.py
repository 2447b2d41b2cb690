#!/usr/bin/env python3
"""fleet.py: N nodes fetch the same files from one origin over shaped
links, each node in a network namespace of its own; one JSON line per mode.

  bench/fleet/fleet.py --modes direct,mirror,torrent --nodes 16 --size 32 --rate 40

Modes (run one after the other on the same cluster, each with fresh caches):
  direct   every node's hubd fetches from the origin (nginx)
  mirror   every node's hubd goes through one nginx mirror (etc/fleet's
           reference config) with a `mirror` rule; the mirror asks the origin
  torrent  a reference BitTorrent swarm: node 0 fetches over plain HTTP and
           seeds, the others leech with Debian's python3-libtorrent, peers
           found through Debian's opentracker
  hubd-swarm  every node's hubd is a member of the cluster swarm (fleet_*
           settings, one CA made for the run); each fetches as in direct

What a line holds is described in bench/README.md ("A cluster on one machine"). The cluster
and everything it ran are torn down by name and pid at the end, also on an
error, Ctrl-C or SIGTERM. Exit status: 0 when every mode ran (a node may
still have failed: see "ok"), 1 on an error, 77 when namespaces cannot be
made here (not root).
"""

import argparse
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import sha256_file, write_config, write_random_file  # noqa: E402
from nginx_mirror import mirror_config  # noqa: E402

from cluster import Cluster, ClusterError, netns_unavailable, run  # noqa: E402

HUBD = os.environ.get("HUBD_BIN", os.path.join(ROOT, "build", "daemon", "hubd"))
HUBCTL = os.environ.get("HUBCTL_BIN", os.path.join(ROOT, "build", "client", "hubctl"))
# Taken out of the environment: in nginx's own, NGINX names the sockets it
# inherits on a binary upgrade, and a path there makes it misbehave.
NGINX = os.environ.pop("NGINX", "/usr/sbin/nginx")
OPENTRACKER = os.environ.get("OPENTRACKER", "/usr/bin/opentracker")
# Debian's python3-libtorrent is built for Debian's python3, which a pyenv
# or venv python3 earlier in PATH is not.
TORRENT_PYTHON = os.environ.get("TORRENT_PYTHON", "/usr/bin/python3")
NGINX_ORIGIN = os.path.join(ROOT, "scripts", "nginx-origin.sh")
TORRENT_NODE = os.path.join(HERE, "torrent_node.py")
FLEET_CERTS = os.path.join(ROOT, "scripts", "fleet-certs.sh")
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # only read, never used: the upstream is http

MODES = ("direct", "mirror", "torrent", "hubd-swarm")
ORIGIN_ADDR, MIRROR_ADDR, TRACKER_ADDR = "10.77.0.2", "10.77.0.3", "10.77.0.4"
ORIGIN_BASE = "http://%s/files" % ORIGIN_ADDR
MIRROR_PORT, TRACKER_PORT = 8080, 6969
FLEET_PORT = 7000  # a hubd-swarm node's pieces; its metadata on the next port
CPU_BOUND_IDLE = 0.30  # below this share of idle CPU a run measures the CPU, not the links


def node_suffix(i):
    """Node i's address is 10.77.<1 + i/250>.<1 + i%250>."""
    return "%d.%d" % (1 + i // 250, 1 + i % 250)


def cpu_times():
    """(idle, total) jiffies of all CPUs from /proc/stat; idle counts
    iowait, as a disk wait leaves the CPU free for others."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:9]]
    return vals[3] + vals[4], sum(vals)


class Run:
    """The cluster, the files and the modes of one invocation."""

    def __init__(self, args):
        self.args = args
        self.prefix = args.prefix or "hf%d" % os.getpid()
        base = args.workdir or os.environ.get("TMPDIR") or "/tmp"
        self.dir = tempfile.mkdtemp(prefix=self.prefix + "-", dir=base)
        self.cluster = Cluster(self.prefix)
        self.files = []  # [(name, size, sha256)]
        self.origin_dir = os.path.join(self.dir, "origin")

    # ---- the cluster -----------------------------------------------------

    def make_files(self):
        """args.files files of args.size MiB together, in a folder that is
        the origin's root (and the torrent's name)."""
        root = os.path.join(self.dir, "model")
        os.mkdir(root)
        total = int(self.args.size * 1024 * 1024)
        k = self.args.files
        for i in range(k):
            size = total // k + (total % k if i == k - 1 else 0)
            name = "f%d.bin" % i
            self.files.append((name, size, write_random_file(os.path.join(root, name), size,
                                                             seed=i + 1)))
        self.model_dir = root

    def build(self):
        a = self.args
        hosts = [("origin", "0.2", a.origin_rate, a.origin_rate)]
        if "mirror" in a.modes:
            hosts.append(("mirror", "0.3", a.mirror_rate, a.mirror_rate))
        if "torrent" in a.modes:
            hosts.append(("tracker", "0.4", 0, 0))  # a few small requests: unshaped
        hosts += [("n%d" % i, node_suffix(i), a.rate, a.rate) for i in range(a.nodes)]
        self.cluster.build(hosts)
        self.start_origin()

    def start_origin(self):
        """nginx through scripts/nginx-origin.sh, inside the origin's
        namespace: it daemonizes, so it is stopped by the pid it prints."""
        out = self.cluster.run_in("origin", ["env", "NGINX_BIND=" + ORIGIN_ADDR, "NGINX=" + NGINX,
                                             "bash", NGINX_ORIGIN, "start", self.origin_dir,
                                             self.model_dir, "80"])
        self.cluster.extra_pids.append(int(out.split()[-1]))

    def origin_sent(self):
        """Body bytes the origin sent for the files so far (its access log)."""
        total = 0
        for name, _, _ in self.files:
            out = run(["bash", NGINX_ORIGIN, "sent", self.origin_dir, "/files/" + name])
            total += int(out.split()[0])
        return total

    def close(self):
        self.cluster.close()
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- measuring -------------------------------------------------------

    def measure(self, mode, body):
        """Runs body(marks) -> {node index: (end time or None, error)} and
        builds the mode's JSON record around it. body starts and stops the
        clock: it sets marks t0 and t1 (time.monotonic()), cpu0 and cpu1
        (/proc/stat), own0 and own1 (the cluster's CPU seconds)."""
        a = self.args
        before_bytes = self.cluster.counters()
        before_origin = self.origin_sent()
        marks = {}
        ends = body(marks)
        cpu1 = marks["cpu1"]
        t1 = marks.get("t1") or time.monotonic()
        after_bytes = self.cluster.counters()
        after_origin = self.origin_sent()

        size = sum(s for _, s, _ in self.files)
        s_over_b = size * 8 / (a.rate * 1e6) if a.rate else None
        t0 = marks["t0"]
        # The late nodes (--late) are timed from their own start, apart.
        late_t0 = marks.get("late", {})
        times, late_times = [], []
        errors = {}
        for i in range(a.nodes):
            end, err = ends.get(i, (None, "never started"))
            into = late_times if i >= a.nodes - a.late else times
            if end is None:
                errors["n%d" % i] = err
                into.append(None)
            else:
                into.append(round(end - late_t0.get(i, t0), 3))
        done = [t for t in times if t is not None]
        late_done = [t for t in late_times if t is not None]
        idle = (cpu1[0] - marks["cpu0"][0]) / max(1, cpu1[1] - marks["cpu0"][1])
        cpu_bound = idle < CPU_BOUND_IDLE
        all_ok = len(done) + len(late_done) == a.nodes
        t_all = max(done) if len(done) == len(times) else None
        delta = {r: (after_bytes[r][0] - before_bytes[r][0], after_bytes[r][1] - before_bytes[r][1])
                 for r in after_bytes}
        origin_bytes = after_origin - before_origin
        rec = {
            "mode": mode,
            "nodes": a.nodes,
            "files": a.files,
            "size_bytes": size,
            "rate_mbit": a.rate,
            "origin_rate_mbit": a.origin_rate,
            "s_over_b": round(s_over_b, 3) if s_over_b else None,
            "ok": len(done) + len(late_done),
            "verified": all_ok,
            "t_first": min(done) if done else None,
            "t_median": round(statistics.median(done), 3) if done else None,
            "t_all": t_all,
            # The link figure; none where the CPU, not the links, decided.
            "t_all_over_sb": (round(t_all / s_over_b, 3)
                              if t_all is not None and s_over_b and not cpu_bound else None),
            "t_nodes": times,
            "late": a.late,
            "origin_bytes": origin_bytes,
            "origin_ratio": round(origin_bytes / size, 3),
            "node_up": [delta["n%d" % i][0] for i in range(a.nodes)],
            "node_down": [delta["n%d" % i][1] for i in range(a.nodes)],
            "hosts": {r: {"up": d[0], "down": d[1]} for r, d in delta.items()
                      if not r.startswith("n")},
            "cpu_idle": round(idle, 3),
            "cpu_bound": cpu_bound,
            # Cores the run's own processes kept busy (0..cores).
            "cpu_own": round((marks["own1"] - marks["own0"]) / max(1e-3, t1 - t0), 3),
            "prefix": self.prefix,
            "errors": errors,
        }
        if a.late:
            # The late phase alone: its own idle share and mark.
            lc0 = marks["late_cpu0"]
            late_idle = (cpu1[0] - lc0[0]) / max(1, cpu1[1] - lc0[1])
            t_late = max(late_done) if len(late_done) == a.late else None
            rec["t_late_nodes"] = late_times
            rec["t_late"] = t_late
            rec["t_late_over_sb"] = (round(t_late / s_over_b, 3) if t_late is not None and
                                     s_over_b and late_idle >= CPU_BOUND_IDLE else None)
            rec["late_cpu_idle"] = round(late_idle, 3)
            rec["late_cpu_bound"] = late_idle < CPU_BOUND_IDLE
        return rec

    def fill_time(self):
        """Seconds for all the files to cross the slower of the origin's
        and the mirror's links (1 s where neither is shaped)."""
        size = sum(s for _, s, _ in self.files)
        rates = [r for r in (self.args.origin_rate, self.args.mirror_rate) if r]
        return size * 8 / (min(rates) * 1e6) if rates else 1.0

    def deadline(self):
        """A bound on one mode's run, far above any sane figure: a stuck
        node fails its run instead of hanging the benchmark."""
        if self.args.timeout:
            return self.args.timeout
        size = sum(s for _, s, _ in self.files)
        slowest = min(r for r in (self.args.rate, self.args.origin_rate, self.args.mirror_rate)
                      if r) if (self.args.rate or self.args.origin_rate) else 0
        per = size * 8 / (slowest * 1e6) if slowest else 1.0
        return 120 + 10 * self.args.nodes * per

    # ---- hubd modes ------------------------------------------------------

    def start_mirror(self, mdir):
        """etc/fleet/nginx-mirror.conf in the mirror's namespace, in front
        of the origin; nginx in the foreground, our child."""
        os.makedirs(os.path.join(mdir, "cache", "hub-temp"))
        conf = os.path.join(mdir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(mirror_config(mdir, "http://%s" % ORIGIN_ADDR, CA_BUNDLE, "localhost",
                                  "%s:%d" % (MIRROR_ADDR, MIRROR_PORT)))
        log = open(os.path.join(mdir, "nginx.stderr"), "wb")
        p = self.cluster.popen("mirror", [NGINX, "-p", mdir, "-e", os.path.join(mdir, "error.log"),
                                          "-c", conf, "-g", "daemon off;"],
                               stdout=log, stderr=log, start_new_session=True)
        # nginx writes its pid file once its sockets listen.
        wait(lambda: os.path.exists(os.path.join(mdir, "nginx.pid")) or p.poll() is not None,
             10, "the mirror nginx to listen")
        if p.poll() is not None:
            raise ClusterError("the mirror nginx exited: see %s" % mdir)
        return p

    def make_certs(self):
        """The swarm's CA and one node certificate, made once per run with
        scripts/fleet-certs.sh: CN=* lets every node use the same pair."""
        pki = os.path.join(self.dir, "pki")
        if not os.path.exists(os.path.join(pki, "node.pem")):
            run(["sh", FLEET_CERTS, "ca", pki])
            run(["sh", FLEET_CERTS, "node", pki, "node"])
        return pki

    def fleet_keys(self, mdir, i):
        """Node i's fleet_* settings; the members' list is written once."""
        peers = os.path.join(mdir, "fleet_peers")
        if not os.path.exists(peers):
            with open(peers, "w") as f:
                f.write("".join("10.77.%s:%d\n" % (node_suffix(k), FLEET_PORT)
                                for k in range(self.args.nodes)))
        pki = self.make_certs()
        return {"fleet_listen": "10.77.%s:%d" % (node_suffix(i), FLEET_PORT),
                "fleet_peers": peers, "fleet_ca": os.path.join(pki, "ca.pem"),
                "fleet_cert": os.path.join(pki, "node.pem"),
                "fleet_key": os.path.join(pki, "node.key")}

    def start_hubds(self, mdir, mode, which):
        """The hubd of each node in which, listening when this returns:
        [(Popen, socket, dir)]."""
        hubs = []
        for i in which:
            d = os.path.join(mdir, "n%d" % i)
            os.makedirs(d)
            # Hundreds of flows on one shaped link starve some of them for
            # longer than idle_timeout (a TCP retransmission backing off):
            # with 2 retries, 17 of 32 nodes failed a direct run of 8 files.
            # An attempt resumes from the byte it had, so many retries cost
            # little. hubd's timeouts stay at their defaults: a connection
            # lost on the way (its peer's reset dropped at a full queue) is
            # given up after 60 s.
            keys = {"retries": "20"}
            if mode == "mirror":
                keys["mirror"] = "%s/ http://%s:%d/" % ("http://" + ORIGIN_ADDR, MIRROR_ADDR,
                                                       MIRROR_PORT)
                # The mirror's cache lock holds a request until the first one
                # for that file has filled the cache: the response head comes
                # after the files crossed the slower of the origin's and the
                # mirror's links (etc/fleet/nginx-mirror.conf).
                t = str(int(60 + 3 * self.fill_time()))
                keys.update(header_timeout=t, first_byte_timeout=t)
            if mode == "hubd-swarm":
                keys.update(self.fleet_keys(mdir, i))
            conf = write_config(os.path.join(d, "hubd.conf"), **keys)
            sock = os.path.join(d, "hubd.sock")
            log = open(os.path.join(d, "hubd.log"), "wb")
            p = self.cluster.popen("n%d" % i, [HUBD, "--socket", sock, "--cache-dir",
                                               os.path.join(d, "cache"), "--config", conf,
                                               "--log-level", "info"],
                                   stdout=log, stderr=log, start_new_session=True)
            self.started.append(p)
            hubs.append((p, sock, d))
        for p, sock, d in hubs:
            wait(lambda: unix_answers(sock) or p.poll() is not None, 30, "hubd to listen")
            if p.poll() is not None:
                raise ClusterError("hubd exited with %d: see %s/hubd.log" % (p.returncode, d))
        return hubs

    def hubd_mode(self, mode):
        mdir = os.path.join(self.dir, mode)
        os.makedirs(mdir)
        n, late = self.args.nodes, self.args.late
        self.started = []
        try:
            if mode == "mirror":
                self.started.append(self.start_mirror(os.path.join(mdir, "mirror")))
            hubs = self.start_hubds(mdir, mode, range(n - late))

            def body(marks):
                return self.fetch_all(hubs, marks,
                                      lambda: self.start_hubds(mdir, mode, range(n - late, n)))
            rec = self.measure(mode, body)
            if rec["verified"]:
                rec["verified"] = self.check_outputs(hubs)
            if mode == "hubd-swarm":
                rec.update(self.swarm_sources(hubs))
            return rec
        finally:
            self.cluster.stop_all(list(reversed(self.started)))
            if not self.args.keep:
                shutil.rmtree(mdir, ignore_errors=True)

    def fetch_all(self, hubs, marks, start_late):
        """Every node asks its hubd for every file at once (one hubctl per
        file, as a model download runs its files side by side). With
        --late K, the last K nodes' hubds start once the others have all
        their files, and then fetch the same way (timed from there)."""
        ends = {}
        self.outputs = {}
        lock = threading.Lock()

        def one(i, sock, name, digest):
            p = self.cluster.popen("n%d" % i, [HUBCTL, "--socket", sock, "fetch", "--sha256",
                                               digest, "%s/%s" % (ORIGIN_BASE, name)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
            try:
                out, err = p.communicate(timeout=self.deadline())
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                err = b"timed out; " + err
            end = time.monotonic()
            with lock:
                prev_end, prev_err = ends.get(i, (0.0, None))
                if p.returncode != 0:
                    ends[i] = (None, err.decode(errors="replace").strip()[-500:] or
                               "hubctl exit %d" % p.returncode)
                elif prev_err is None and prev_end is not None:
                    ends[i] = (max(prev_end, end), None)
                    self.outputs.setdefault(i, []).append((out.decode().strip(), digest))

        def fetch(first, group):
            threads = [threading.Thread(target=one, args=(i, sock, name, digest), daemon=True)
                       for i, (_, sock, _) in enumerate(group, first)
                       for name, _, digest in self.files]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        marks["own0"] = self.cluster.cpu_seconds()
        marks["cpu0"] = cpu_times()
        marks["t0"] = time.monotonic()
        fetch(0, hubs)
        if self.args.late:
            first = len(hubs)
            hubs += start_late()
            marks["late_cpu0"] = cpu_times()
            now = time.monotonic()
            marks["late"] = {i: now for i in range(first, len(hubs))}
            fetch(first, hubs[first:])
        marks["t1"] = time.monotonic()
        marks["cpu1"] = cpu_times()
        marks["own1"] = self.cluster.cpu_seconds()
        return ends

    def swarm_sources(self, hubs):
        """Where each node got each file, from its hubd's log: "s" from
        the swarm, "o" from the origin as the file's seed, "f" from the
        origin after the swarm failed it (fleet_wait, no seed), "?" none
        of these (e.g. a node that failed). One string per node, a letter
        per file in the files' order."""
        sources = []
        for _, _, d in hubs:
            try:
                with open(os.path.join(d, "hubd.log"), errors="replace") as f:
                    log = f.read()
            except OSError:
                log = ""
            letters = ""
            for name, _, digest in self.files:
                url = "%s/%s" % (ORIGIN_BASE, name)
                swarm = seed = fell = False
                for line in log.splitlines():
                    if "fleet: %s: " % digest in line:
                        swarm |= "bytes from the swarm" in line
                        seed |= ("this node is the file's seed" in line or
                                 "fetching it to seed" in line)
                    elif "fetching %s from the origin" % url in line:
                        # jobs_swarm_origin(): a takeover seed or a fallback.
                        if "this node is its seed now" in line:
                            seed = True
                        else:
                            fell = True
                letters += "f" if fell else "o" if seed else "s" if swarm else "?"
            sources.append(letters)
        joined = "".join(sources)
        return {
            "sources": sources,
            "from_swarm": joined.count("s"),
            "from_seed": joined.count("o"),
            "fell_back": joined.count("f"),
            # Nodes that got every file from the swarm / any from the origin.
            "nodes_swarm": sum(1 for x in sources if x and set(x) == {"s"}),
            "nodes_origin": sum(1 for x in sources if "o" in x or "f" in x),
        }

    def check_outputs(self, hubs):
        """Each path hubctl printed holds its file (read back after the
        clock stopped: hubctl --sha256 has checked it already)."""
        for i in range(len(hubs)):
            got = self.outputs.get(i, [])
            if len(got) != len(self.files):
                return False
            for path, digest in got:
                if sha256_file(path) != digest:
                    return False
        return True

    # ---- the reference swarm ----------------------------------------------

    def start_tracker(self, tdir):
        """Debian's opentracker is built with a whitelist of info-hashes
        (WANT_ACCESSLIST_WHITE) and answers any other with "Requested
        download is not authorized". It starts with an empty list; a
        torrent is admitted by adding its hash and sending SIGHUP."""
        os.makedirs(tdir)
        os.chmod(tdir, 0o755)  # it chroots there and drops to "nobody"
        self.whitelist = os.path.join(tdir, "whitelist.txt")
        open(self.whitelist, "w").close()
        log = open(os.path.join(tdir, "opentracker.log"), "wb")
        p = self.cluster.popen("tracker", [OPENTRACKER, "-i", TRACKER_ADDR, "-p", str(TRACKER_PORT),
                                           "-P", str(TRACKER_PORT), "-d", tdir, "-w",
                                           "whitelist.txt"],
                               stdout=log, stderr=log, start_new_session=True)
        return p

    def admit(self, tracker, info_hash):
        with open(self.whitelist, "a") as f:
            f.write(info_hash + "\n")
        tracker.send_signal(signal.SIGHUP)
        # An announce that leaves at once (event=stopped) from the tracker's
        # own namespace tells whether the hash is admitted yet.
        q = "".join("%%%s" % info_hash[i:i + 2] for i in range(0, 40, 2))
        url = ("http://%s:%d/announce?info_hash=%s&peer_id=-FLEETPROBE-00000000&port=1"
               "&uploaded=0&downloaded=0&left=0&event=stopped" % (TRACKER_ADDR, TRACKER_PORT, q))

        def admitted():
            p = subprocess.run(["ip", "netns", "exec", self.cluster.hosts["tracker"].ns, "curl",
                                "-s", "--max-time", "2", url], capture_output=True)
            return p.returncode == 0 and b"failure reason" not in p.stdout
        wait(admitted, 10, "opentracker to admit the torrent after SIGHUP")

    def torrent_mode(self):
        mode = "torrent"
        mdir = os.path.join(self.dir, mode)
        os.makedirs(mdir)
        started = []
        try:
            tracker = self.start_tracker(os.path.join(mdir, "tracker"))
            started.append(tracker)
            torrent = os.path.join(mdir, "model.torrent")
            # The publisher's step, before the clock: the torrent of the files.
            info_hash = run([TORRENT_PYTHON, TORRENT_NODE, "--make", self.model_dir, torrent,
                             "http://%s:%d/announce" % (TRACKER_ADDR, TRACKER_PORT)]).strip()
            self.admit(tracker, info_hash)
            nodes = []
            for i in range(self.args.nodes):
                d = os.path.join(mdir, "n%d" % i)
                os.makedirs(d)
                argv = [TORRENT_PYTHON, TORRENT_NODE, "--torrent", torrent, "--save", d, "--listen",
                        "10.77." + node_suffix(i)]
                argv += ["--sha256=%s=%s" % (name, digest) for name, _, digest in self.files]
                if i == 0:
                    argv += ["--fetch", ORIGIN_BASE]
                p = self.cluster.popen("n%d" % i, argv, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE,
                                       stderr=open(os.path.join(d, "node.log"), "wb"),
                                       start_new_session=True)
                started.append(p)
                nodes.append(p)

            def body(marks):
                return self.swarm(nodes, marks)
            return self.measure(mode, body)
        finally:
            for p in started:
                if p.stdin and not p.stdin.closed:
                    try:
                        p.stdin.close()
                    except OSError:
                        pass
            self.cluster.stop_all(list(reversed(started)))
            if not self.args.keep:
                shutil.rmtree(mdir, ignore_errors=True)

    def swarm(self, nodes, marks):
        events = {i: {} for i in range(len(nodes))}
        cond = threading.Condition()

        def reader(i, p):
            for line in p.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                with cond:
                    events[i][ev["event"]] = ev
                    cond.notify_all()
            with cond:
                events[i].setdefault("exit", {"t": time.monotonic()})
                cond.notify_all()

        for i, p in enumerate(nodes):
            threading.Thread(target=reader, args=(i, p), daemon=True).start()

        def all_have(ev, which):
            return all(ev in events[i] or "exit" in events[i] for i in which)

        def go(which):
            for i in which:
                try:
                    nodes[i].stdin.write(b"go\n")
                    nodes[i].stdin.flush()
                except OSError:
                    pass
        n, late = len(nodes), self.args.late
        on_time, late_ones = range(n - late), range(n - late, n)
        with cond:
            # Python and libtorrent's import, 64 of them on 2 busy cores.
            if not cond.wait_for(lambda: all_have("ready", range(n)), 60 + n):
                raise ClusterError("torrent nodes did not start within %d s" % (60 + n))
        marks["own0"] = self.cluster.cpu_seconds()
        marks["cpu0"] = cpu_times()
        marks["t0"] = time.monotonic()
        go(on_time)
        with cond:
            cond.wait_for(lambda: all_have("done", on_time), self.deadline())
        if late:
            # They join a swarm whose every peer has the files and seeds.
            marks["late_cpu0"] = cpu_times()
            now = time.monotonic()
            marks["late"] = {i: now for i in late_ones}
            go(late_ones)
            with cond:
                cond.wait_for(lambda: all_have("done", late_ones), self.deadline())
        marks["cpu1"] = cpu_times()
        marks["t1"] = time.monotonic()
        marks["own1"] = self.cluster.cpu_seconds()
        with cond:
            ends = {}
            for i, e in events.items():
                if "done" in e and e["done"].get("ok"):
                    ends[i] = (e["done"]["t"], None)
                elif "done" in e:
                    ends[i] = (None, "SHA-256 mismatch after the swarm")
                else:
                    ends[i] = (None, "exited early" if "exit" in e else "timed out")
        return ends


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise ClusterError("timed out waiting for " + what)


def unix_answers(path):
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", "--mode", default="direct,mirror,torrent",
                    help="comma-separated, run in this order: " + ", ".join(MODES))
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--size", type=float, default=8, help="MiB, all files together")
    ap.add_argument("--files", type=int, default=1, help="the size split into this many files")
    ap.add_argument("--rate", type=float, default=40, help="each node's link, Mbit/s each way")
    ap.add_argument("--origin-rate", type=float, help="the origin's link (default: --rate)")
    ap.add_argument("--mirror-rate", type=float, help="the mirror's link (default: --rate)")
    ap.add_argument("--timeout", type=float, help="seconds a mode may take (default: generous)")
    ap.add_argument("--late", type=int, default=0, metavar="K",
                    help="the last K nodes start (hubd) and fetch once the others are done")
    ap.add_argument("--prefix", help="namespace name prefix (default hf<pid>)")
    ap.add_argument("--workdir", help="where the run's temp dir goes (default $TMPDIR or /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, caches)")
    a = ap.parse_args(argv)
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in MODES:
            ap.error("unknown mode %r (modes: %s)" % (m, ", ".join(MODES)))
    if not 1 <= a.nodes <= 2000:
        ap.error("--nodes must be 1..2000")
    if not 0 <= a.late < a.nodes:
        ap.error("--late must be 0..nodes-1: at least one node fetches first")
    if a.files < 1 or a.size <= 0 or a.rate < 0:
        ap.error("--files must be >= 1, --size > 0 and --rate >= 0 (0: unshaped)")
    if a.origin_rate is None:
        a.origin_rate = a.rate
    if a.mirror_rate is None:
        a.mirror_rate = a.rate
    if a.prefix and not a.prefix.isalnum():
        ap.error("--prefix must be letters and digits")
    return a


def missing_tools(modes):
    need = [("nginx", NGINX)]
    if {"direct", "mirror", "hubd-swarm"} & set(modes):
        need += [("hubd (HUBD_BIN)", HUBD), ("hubctl (HUBCTL_BIN)", HUBCTL)]
    if "hubd-swarm" in modes:
        need += [("openssl", shutil.which("openssl") or "/usr/bin/openssl")]
    if "torrent" in modes:
        need += [("opentracker", OPENTRACKER), ("python3 with libtorrent", TORRENT_PYTHON)]
    out = [what for what, path in need if not os.access(path, os.X_OK)]
    if "hubd-swarm" in modes and not out:
        # A hubd built without libtorrent-rasterbar has no swarm (docs/FLEET.md).
        ldd = subprocess.run(["ldd", HUBD], capture_output=True, text=True).stdout
        if "libtorrent" not in ldd:
            out.append("a hubd built with libtorrent-rasterbar (for hubd-swarm)")
    if "torrent" in modes and not out:
        if subprocess.run([TORRENT_PYTHON, "-c", "import libtorrent"],
                          capture_output=True).returncode != 0:
            out.append("python3-libtorrent (import libtorrent in %s)" % TORRENT_PYTHON)
    return out


def main(argv=None):
    args = parse_args(argv)
    reason = netns_unavailable()
    if reason:
        print("fleet: cannot build a cluster here: %s" % reason, file=sys.stderr)
        return 77
    missing = missing_tools(args.modes)
    if missing:
        print("fleet: missing: %s (scripts/install-deps.sh, and a build of hubd)"
              % ", ".join(missing), file=sys.stderr)
        return 1
    r = Run(args)
    closed = []

    def teardown():
        if closed:
            return
        closed.append(True)
        # A second Ctrl-C must not cut the teardown short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        r.close()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    atexit.register(teardown)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        r.make_files()
        r.build()
        print("fleet: cluster %s up: %d nodes, origin %s, work dir %s"
              % (r.prefix, args.nodes, ORIGIN_ADDR, r.dir), file=sys.stderr)
        for mode in args.modes:
            rec = r.torrent_mode() if mode == "torrent" else r.hubd_mode(mode)
            rec["pids"] = r.cluster.pids()
            print(json.dumps(rec), flush=True)
        return 0
    except ClusterError as e:
        print("fleet: %s" % e, file=sys.stderr)
        return 1
    finally:
        teardown()


if __name__ == "__main__":
    sys.exit(main())
