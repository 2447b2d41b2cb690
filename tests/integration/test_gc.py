"""GC takes its turn with the eviction runs: asked while a reload's
eviction runs, it waits for that run, evicts the rest, and answers the
cache's size as it stands after both (what STATS and the disk say); above
its target it says what kept the rest, and why."""

import json
import os
import signal
import time

import cachefill
from harness import HubTestCase, wait_for, write_config


class GcTest(HubTestCase):
    N = 20000  # blobs: a reload's eviction of most of them runs long enough to be caught

    def blob_bytes(self):
        return sum(os.path.getsize(p) for p in self.hubd.blob_files())

    def gc_json(self, *args):
        r = self.hubctl("gc", "--json", *args)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out)["result"]

    def test_gc_during_a_reloads_eviction_answers_the_size_after_both(self):
        # Before, GC evicted beside the reload's run (the same least recently
        # used blobs, each taking some the other had just removed) and
        # answered its own count: a size above its target, or one the cache
        # no longer had, while the run went on.
        self.assertEqual(self.hubd.stop(), 0)
        total = cachefill.fill(self.hubd.cache, self.N)
        self.hubd.start(timeout=120)  # its start-up records every blob
        self.assertEqual(self.stats()["cache_bytes"], total)
        target = total // 10
        since = len(self.hubd.read_log())
        write_config(self.hubd.config + ".new", max_cache_size=str(target))
        os.rename(self.hubd.config + ".new", self.hubd.config)
        os.kill(self.hubd.proc.pid, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log()[since:], timeout=30,
                 what="the reload")
        r = self.hubctl("gc", "--max-size", str(target), "--json")  # the run is under way
        self.assertEqual(r.rc, 0, r)
        res = json.loads(r.out)["result"]
        st = self.stats()
        on_disk = self.blob_bytes()
        print("\n  gc during the reload's eviction: waited %s, evicted %d, size %d, target %d"
              % (res.get("waited"), res["evicted"], res["size"], target))
        self.assertEqual(res["target"], target)
        self.assertLessEqual(res["size"], target, res)
        self.assertEqual(res["size"], st["cache_bytes"], (res, st))
        self.assertEqual(res["size"], on_disk, res)
        # Nothing went on after the answer: the cache stays as GC said.
        time.sleep(0.5)
        self.assertEqual((self.stats()["cache_bytes"], self.blob_bytes()), (res["size"], on_disk))
        # Its line says the size against the target.
        r = self.hubctl("gc", "--max-size", str(target))
        self.assertEqual(r.rc, 0, r)
        self.assertIn("evicted 0 blob(s), 0 B freed; the cache holds", r.out)
        self.assertIn("(target %s)" % ("%.1f KiB" % (target / 1024)), r.out)

    def test_gc_above_its_target_says_the_pins_kept_it(self):
        self.make_file("a", 3000, seed=1)
        self.make_file("b", 5000, seed=2)
        for name in ("a", "b"):
            self.assertEqual(self.hubctl("fetch", self.origin.url("/files/" + name)).rc, 0)
        self.assertEqual(self.hubctl("pin", self.origin.url("/files/b")).rc, 0)
        res = self.gc_json("--max-size", "1000")
        self.assertEqual((res["evicted"], res["freed"], res["size"], res["target"]),
                         (1, 3000, 5000, 1000), res)
        self.assertEqual((res["pinned_bytes"], res["pinned_blobs"], res["held"], res["holds"]),
                         (5000, 1, 0, 0), res)
        self.assertIs(res["waited"], False)
        r = self.hubctl("gc", "--max-size", "1000")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("the cache holds 4.9 KiB, above its 1000 B target: 0 B held by 0 hold(s), "
                      "4.9 KiB pinned", r.out)
        self.assertIn("pinned: 1 blob(s)", r.out)
        self.assertIn("hubctl unpin", r.out)
        self.assertEqual(self.stats()["cache_bytes"], 5000)
