// A command-line driver of @huggingface/hub (the npm package pinned in
// package-lock.json) for hubd's integration tests: the Python tests run it
// against the stand-in Hub (tests/hubstub.py) or against hubd's /hf front.
//
//   node tests/js/hubclient.mjs download --hub-url URL --repo org/name
//        [--type model|dataset|space] --path P [--revision R] [--token hf_..]
//        [--no-xet] --out FILE
//   node tests/js/hubclient.mjs download-many ... --path P1 --path P2 [--copies K] --dir DIR
//   node tests/js/hubclient.mjs snapshot --hub-url URL --repo R [--revision R] [--token T] --dir DIR
//   node tests/js/hubclient.mjs info --hub-url URL --repo R [--path P] [--revision R] [--token T]
//   node tests/js/hubclient.mjs list --hub-url URL --repo R [--path DIR] [--revision R] [--token T]
//   node tests/js/hubclient.mjs cache-file --hub-url URL --repo R --path P [--path P2]...
//        [--revision R] [--token T] --dir CACHE_DIR      (downloadFileToCacheDir, each path)
//   node tests/js/hubclient.mjs scan-cache --dir CACHE_DIR                    (scanCacheDir)
//
// The last line of stdout is one JSON object: {"ok": true, ...} or
// {"ok": false, "error": MESSAGE, "status": HTTP_STATUS_OR_NULL}; the exit
// status is 0 either way (2 for a usage error). Every request the library
// makes is listed in "requests" as [method, url, Range header or null,
// status, final url after redirects]. A request to any host but a loopback
// address is refused (the library must not reach huggingface.co when hubUrl
// is given): it fails the command.
//
// xet: downloadFile uses xet only when the resolve answer (to its
// "Range: bytes=0-0" GET, sent with "Accept: application/vnd.xet-fileinfo+json,
// */*") has Content-Type application/vnd.xet-fileinfo+json; otherwise it
// downloads over plain HTTP from the resolve URL. --no-xet passes xet: false.

import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { readdir, rm, stat, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
	downloadFile,
	downloadFileToCacheDir,
	scanCacheDir,
	fileDownloadInfo,
	listFiles,
	modelInfo,
	datasetInfo,
	spaceInfo,
	snapshotDownload,
} from "@huggingface/hub";

const requests = [];
const realFetch = globalThis.fetch;
const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"]);

globalThis.fetch = async (input, init = {}) => {
	const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
	const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
	const rec = [init.method ?? "GET", url.href, headers.get("Range"), null, null];
	requests.push(rec);
	if (!LOOPBACK.has(url.hostname)) {
		throw new Error(`refused: a request to a non-loopback host ${url.host}`);
	}
	const resp = await realFetch(input, init);
	rec[3] = resp.status;
	rec[4] = resp.url;
	if (resp.url && !LOOPBACK.has(new URL(resp.url).hostname)) {
		throw new Error(`refused: redirected to a non-loopback host ${resp.url}`);
	}
	return resp;
};
// downloadFileToCacheDir logs "Downloading ..." with console.debug: keep stdout for the result.
console.debug = (...a) => process.stderr.write(a.join(" ") + "\n");

function parseArgs(argv) {
	const opts = { path: [] };
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i];
		if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`);
		const key = a.slice(2);
		if (key === "no-xet" || key === "expand") {
			opts[key] = true;
			continue;
		}
		if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
		if (key === "path") opts.path.push(argv[++i]);
		else opts[key] = argv[++i];
	}
	if (!opts.scan && (!opts["hub-url"] || !opts.repo)) throw new Error("--hub-url and --repo are required");
	return opts;
}

function common(o) {
	return {
		repo: { type: o.type ?? "model", name: o.repo },
		hubUrl: o["hub-url"],
		...(o.revision && { revision: o.revision }),
		...(o.token && { accessToken: o.token }),
	};
}

async function sha256File(file) {
	return createHash("sha256").update(await readFile(file)).digest("hex");
}

async function downloadOne(o, path, out) {
	const blob = await downloadFile({ ...common(o), path, ...(o["no-xet"] && { xet: false }) });
	if (blob === null) return { ok: false, path, error: "EntryNotFound", status: 404 };
	const hash = createHash("sha256");
	let size = 0;
	const counted = Readable.fromWeb(blob.stream()).on("data", (b) => {
		hash.update(b);
		size += b.length;
	});
	try {
		await pipeline(counted, createWriteStream(out));
	} catch (e) {
		await rm(out, { force: true });
		return { ok: false, path, error: String(e?.message ?? e), status: e?.statusCode ?? null, written: size };
	}
	return { ok: true, path, size, expected_size: blob.size, sha256: hash.digest("hex") };
}

async function walk(dir, root = dir, out = {}) {
	for (const ent of await readdir(dir, { withFileTypes: true })) {
		const p = join(dir, ent.name);
		const st = await stat(p); // follows the snapshot's symlinks to the blobs
		if (st.isDirectory()) await walk(p, root, out);
		else out[relative(root, p)] = { size: st.size, sha256: await sha256File(p) };
	}
	return out;
}

const commands = {
	async download(o) {
		if (o.path.length !== 1 || !o.out) throw new Error("download needs one --path and --out");
		return downloadOne(o, o.path[0], o.out);
	},
	async "download-many"(o) {
		if (!o.path.length || !o.dir) throw new Error("download-many needs --path and --dir");
		const jobs = [];
		for (let k = 0; k < Number(o.copies ?? 1); k++) {
			o.path.forEach((p, i) => jobs.push(downloadOne(o, p, join(o.dir, `${k}-${i}`))));
		}
		const results = await Promise.all(jobs.map((j) => j.catch((e) => errorOf(e))));
		return { ok: results.every((r) => r.ok), results };
	},
	async snapshot(o) {
		if (!o.dir) throw new Error("snapshot needs --dir");
		const folder = await snapshotDownload({ ...common(o), cacheDir: o.dir });
		return { ok: true, folder, files: await walk(folder) };
	},
	async "cache-file"(o) {
		if (!o.path.length || !o.dir) throw new Error("cache-file needs --path and --dir");
		const files = {};
		for (const path of o.path) {
			const file = await downloadFileToCacheDir({ ...common(o), path, cacheDir: o.dir });
			const st = await stat(file);
			files[path] = { file, size: st.size, sha256: await sha256File(file) };
		}
		return { ok: true, files };
	},
	async "scan-cache"(o) {
		if (!o.dir) throw new Error("scan-cache needs --dir");
		const info = await scanCacheDir(o.dir);
		const repos = info.repos.map((r) => ({
			id: r.id,
			path: r.path,
			size: r.size,
			filesCount: r.filesCount,
			revisions: r.revisions.map((v) => ({
				commitOid: v.commitOid,
				refs: v.refs,
				size: v.size,
				files: v.files.map((f) => ({ path: f.path, blob: f.blob.path, size: f.blob.size })),
			})),
		}));
		return { ok: true, size: info.size, repos, warnings: info.warnings.map((w) => String(w?.message ?? w)) };
	},
	async info(o) {
		if (o.path.length) {
			const info = await fileDownloadInfo({ ...common(o), path: o.path[0] });
			if (info === null) return { ok: false, error: "EntryNotFound", status: 404 };
			const xet = info.xet && {
				hash: info.xet.hash,
				refreshUrl: info.xet.refreshUrl.href,
				reconstructionUrl: info.xet.reconstructionUrl.href,
			};
			return { ok: true, etag: info.etag, size: info.size, url: info.url, xet: xet ?? null };
		}
		const c = common(o);
		const fn = { model: modelInfo, dataset: datasetInfo, space: spaceInfo }[c.repo.type];
		const info = await fn({ ...c, name: o.repo, additionalFields: ["sha", "siblings"] });
		return { ok: true, info };
	},
	async list(o) {
		const entries = [];
		for await (const e of listFiles({ ...common(o), recursive: true, path: o.path[0], expand: !!o.expand })) {
			entries.push(e);
		}
		return { ok: true, entries };
	},
};

function errorOf(e) {
	return { ok: false, error: String(e?.message ?? e), status: e?.statusCode ?? null };
}

const [cmd, ...rest] = process.argv.slice(2);
if (!commands[cmd]) {
	process.stderr.write(`usage: hubclient.mjs download|download-many|snapshot|info|list --hub-url URL --repo R ...\n`);
	process.exit(2);
}
let opts;
try {
	opts = parseArgs(cmd === "scan-cache" ? ["--scan", "1", ...rest] : rest);
} catch (e) {
	process.stderr.write(`hubclient: ${e.message}\n`);
	process.exit(2);
}
let result;
try {
	result = await commands[cmd](opts);
} catch (e) {
	result = errorOf(e);
}
process.stdout.write(JSON.stringify({ ...result, requests }) + "\n");
