"""A cluster of network namespaces on this machine, for fleet.py.

One namespace holds a bridge (and no address: it only switches frames);
every host (the origin, a mirror, a tracker, the nodes) is a namespace of
its own, linked to the bridge by a veth pair. Each link is shaped by tc tbf
on both ends: the host side's egress is the host's upload, the bridge
side's egress its download. The kernel here has tbf, htb, veth and bridge
but no netem, so the links have a rate and no added delay.

Every host knows every other's MAC from the start (permanent neighbour
entries, made once the links are up): the kernel's ARP table is one for
all namespaces, and its gc_thresh3 (1024 entries by default, a setting of
the root namespace, left alone) is far below the N x N entries a swarm of
64 nodes learns; past it, new entries fail ("neighbor table overflow") and
a connect gets "No route to host". Permanent entries are not counted
against that limit.

Everything is named with the run's prefix (hf<pid> by default), made only
inside namespaces this object created (the host's root namespace, its
links and its addresses are never touched), and torn down by name and pid:
close() kills every process it started, then any other process still in
one of its namespaces, then deletes each namespace by name. It is safe to
call twice, and from a signal handler's unwinding.
"""

import json
import os
import signal
import subprocess
import time

IP = os.environ.get("IP", "ip")
TC = os.environ.get("TC", "tc")
# tbf's bucket: a burst below the size of one GSO packet (64 KiB) makes
# the qdisc split every packet, which burns CPU; 256 KiB is the floor, and
# fast links get 10 ms of their rate.
MIN_BURST = 256 * 1024
QUEUE_LATENCY = "50ms"


class ClusterError(RuntimeError):
    pass


def run(argv, check=True):
    """argv's stdout; raises ClusterError with its stderr on failure."""
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and p.returncode != 0:
        why = p.stderr.strip() or "exit %d" % p.returncode
        raise ClusterError("%s: %s" % (" ".join(argv), why))
    return p.stdout


def netns_unavailable():
    """None where namespaces can be made here, else the reason why not."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"
    probe = "hfprobe%d" % os.getpid()
    try:
        run([IP, "netns", "add", probe])
    except (ClusterError, OSError) as e:
        return "ip netns add fails here: %s" % e
    try:
        run([IP, "-n", probe, "link", "add", "b0", "type", "bridge"])
        run([IP, "-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        run([TC, "-n", probe, "qdisc", "add", "dev", "v0", "root", "tbf", "rate", "1mbit",
             "burst", str(MIN_BURST), "latency", QUEUE_LATENCY])
    except (ClusterError, OSError) as e:
        return "a bridge, a veth pair or tc tbf cannot be made in a namespace: %s" % e
    finally:
        run([IP, "netns", "del", probe], check=False)
    return None


def tbf_args(mbit):
    rate_bytes = mbit * 1e6 / 8
    burst = max(MIN_BURST, int(rate_bytes / 100))
    return ["tbf", "rate", "%gmbit" % mbit, "burst", str(burst), "latency", QUEUE_LATENCY]


class Host:
    """One namespace on the bridge: its name, address and link rates."""

    def __init__(self, cluster, role, addr, up_mbit, down_mbit):
        self.role = role  # "origin", "mirror", "tracker", "n0", "n1", ...
        self.ns = "%s-%s" % (cluster.prefix, role)
        self.addr = addr  # IPv4, inside the /16 of the cluster
        self.port = "v" + role  # its veth's end in the bridge namespace (<= 15 chars)
        self.up_mbit = up_mbit  # 0: unshaped
        self.down_mbit = down_mbit


class Cluster:
    """The bridge namespace and its hosts; processes started inside them."""

    NET = "10.77"  # a private /16 that exists only inside these namespaces

    def __init__(self, prefix):
        self.prefix = prefix
        self.bridge_ns = prefix + "-br"
        self.namespaces = []  # made so far, in order; each is deleted by name
        self.hosts = {}  # role -> Host
        self.procs = []  # Popen of everything started inside, stopped by pid
        self.extra_pids = []  # daemons that forked away (nginx-origin.sh), by pid
        self.closed = False  # set by close(): nothing starts after it

    def _add_ns(self, name):
        self.namespaces.append(name)  # first: a signal in between leaves no unnamed one
        run([IP, "netns", "add", name])
        run([IP, "-n", name, "link", "set", "lo", "up"])

    def build(self, hosts):
        """hosts: [(role, addr_suffix, up_mbit, down_mbit)]; addr_suffix is
        the last two bytes of the address ("0.2")."""
        self._add_ns(self.bridge_ns)
        run([IP, "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
        run([IP, "-n", self.bridge_ns, "link", "set", "br0", "up"])
        for role, suffix, up, down in hosts:
            h = Host(self, role, "%s.%s" % (self.NET, suffix), up, down)
            self._add_ns(h.ns)
            # Made inside the bridge namespace, its peer straight into the
            # host's: neither end ever exists in the root namespace.
            run([IP, "-n", self.bridge_ns, "link", "add", h.port, "type", "veth", "peer", "name",
                 "eth0", "netns", h.ns])
            run([IP, "-n", self.bridge_ns, "link", "set", h.port, "master", "br0", "up"])
            run([IP, "-n", h.ns, "addr", "add", h.addr + "/16", "dev", "eth0"])
            run([IP, "-n", h.ns, "link", "set", "eth0", "up"])
            if up:
                run([TC, "-n", h.ns, "qdisc", "add", "dev", "eth0", "root"] + tbf_args(up))
            if down:
                run([TC, "-n", self.bridge_ns, "qdisc", "add", "dev", h.port, "root"] +
                    tbf_args(down))
            self.hosts[role] = h
        self._static_neighbours()
        return self

    def _static_neighbours(self):
        """Each host gets a permanent entry for every other host (see the
        module's docstring): one `ip -batch` per namespace."""
        macs = {}
        for role, h in self.hosts.items():
            link = json.loads(run([IP, "-n", h.ns, "-j", "link", "show", "eth0"]))[0]
            macs[role] = link["address"]
        for role, h in self.hosts.items():
            lines = "".join("neigh replace %s lladdr %s dev eth0 nud permanent\n"
                            % (o.addr, macs[r]) for r, o in self.hosts.items() if r != role)
            p = subprocess.run([IP, "-n", h.ns, "-batch", "-"], input=lines, capture_output=True,
                               text=True)
            if p.returncode != 0:
                raise ClusterError("static neighbours in %s: %s" % (h.ns, p.stderr.strip()))

    def popen(self, role, argv, **kw):
        """argv started inside role's namespace (ip netns exec execs it, so
        the pid is the program's own); kept to be stopped by pid."""
        if self.closed:
            raise ClusterError("the cluster is torn down")
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen([IP, "netns", "exec", self.hosts[role].ns] + list(argv), **kw)
        self.procs.append(p)
        return p

    def run_in(self, role, argv):
        return run([IP, "netns", "exec", self.hosts[role].ns] + list(argv))

    def counters(self):
        """{role: (up_bytes, down_bytes)} of every host's link, read on the
        bridge side in one call: what the port received is the host's
        upload, what it sent the host's download."""
        out = run([IP, "-n", self.bridge_ns, "-j", "-s", "link", "show"])
        by_port = {}
        for link in json.loads(out):
            st = link.get("stats64") or link.get("stats") or {}
            by_port[link["ifname"]] = (st.get("rx", {}).get("bytes", 0),
                                       st.get("tx", {}).get("bytes", 0))
        return {role: by_port.get(h.port, (0, 0)) for role, h in self.hosts.items()}

    def cpu_seconds(self):
        """CPU time (user + system) used so far by the processes now in
        the cluster's namespaces: what the run itself costs, apart from the
        rest of the machine (the kernel's forwarding and shaping, done in
        softirq, is not counted)."""
        ticks = 0
        for ns in self.namespaces:
            for word in run([IP, "netns", "pids", ns], check=False).split():
                try:
                    with open("/proc/%s/stat" % word) as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    ticks += int(fields[11]) + int(fields[12])  # utime, stime
                except (OSError, IndexError, ValueError):
                    pass
        return ticks / os.sysconf("SC_CLK_TCK")

    def pids(self):
        """Every pid this cluster started that may still run."""
        return [p.pid for p in self.procs] + list(self.extra_pids)

    def stop_all(self, procs, timeout=10.0):
        """SIGTERM to each of procs at once, then SIGKILL to any still
        running after timeout; all reaped. Side by side: 64 peers, each a
        few seconds to say goodbye, would take minutes one by one."""
        live = [p for p in procs if p.poll() is None]
        for p in live:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for p in live:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self):
        """Stops every process (ours by pid, then any left in our
        namespaces), then deletes each namespace by name."""
        self.closed = True
        self.stop_all(list(reversed(self.procs)))
        for pid in self.extra_pids:
            _kill_and_wait(pid)
        for ns in reversed(self.namespaces):
            out = run([IP, "netns", "pids", ns], check=False)
            for word in out.split():
                if word.isdigit():
                    _kill_and_wait(int(word))
        for ns in reversed(self.namespaces):
            run([IP, "netns", "del", ns], check=False)
        self.namespaces = []
        self.procs = []
        self.extra_pids = []


def _kill_and_wait(pid, timeout=10.0):
    """Stops a process that is not our child (a daemon that forked, or one
    found in our namespace) by its pid: SIGTERM, poll, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def _alive(pid):
    """pid runs (a zombie, which its parent has yet to reap, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
