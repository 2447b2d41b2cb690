// lt_shim: libtorrent-rasterbar 2.0 behind a C header (lt_shim.h says the
// contract: threads, ownership, errors). This file is the only one of hubd
// that knows a C++ type; nothing it throws leaves it.
#include "lt_shim.h"

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include <boost/asio/error.hpp>
#include <libtorrent/add_torrent_params.hpp>
#include <libtorrent/alert_types.hpp>
#include <libtorrent/create_torrent.hpp>
#include <libtorrent/error_code.hpp>
#include <libtorrent/file_storage.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/session_params.hpp>
#include <libtorrent/settings_pack.hpp>
#include <libtorrent/torrent_flags.hpp>
#include <libtorrent/torrent_handle.hpp>
#include <libtorrent/torrent_info.hpp>
#include <libtorrent/torrent_status.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace
{

// lt_session_free lets the peers go for FREE_DRAIN_MIN steps at least
// (handshakes under way end), FREE_DRAIN_TRIES at most.
constexpr int FREE_DRAIN_MIN = 10;
constexpr int FREE_DRAIN_TRIES = 100;
constexpr int FREE_DRAIN_STEP_MS = 20;

// Where the alerts of a torrent go: its caller's pointer, for as long as
// libtorrent may still speak of it (until torrent_removed_alert).
struct entry {
    void *user;      // lt_add_params_t.user
    lt_torrent_t *t; // the caller's handle; NULL once lt_torrent_remove ran
};

} // namespace

struct lt_session {
    std::unique_ptr<lt::session> ses;
    std::string cert, key, dh; // this node's identity, for every SSL torrent
    // Keyed by the handle: its order (the torrent's control block) holds
    // after the torrent is gone, so late alerts still find their entry.
    std::map<lt::torrent_handle, entry> torrents;
    std::deque<lt_event_t> pending; // converted, not yet polled
};

struct lt_torrent {
    lt_session_t *s;
    lt::torrent_handle h;
    lt_torrent_stats_t seen; // from the last state_update_alert that named it
};

namespace
{

int say(lt_why_t *why, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int say(lt_why_t *why, int rc, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
    }
    return rc;
}

// libtorrent's errors as a negative errno: the system's own codes keep
// their number; libtorrent's and TLS's, which have none, are -EIO (the
// message carries the rest).
int errno_of(lt::error_code const &ec)
{
    if (!ec)
        return 0;
    if ((ec.category() == boost::system::system_category() ||
         ec.category() == boost::system::generic_category()) &&
        ec.value() > 0)
        return -ec.value();
    return -EIO;
}

bool is_tls(lt::error_code const &ec)
{
    return ec && std::strncmp(ec.category().name(), "asio.ssl", 8) == 0;
}

// Runs f; an exception becomes a negative errno and a reason.
template <class F> int guarded(lt_why_t *why, const char *what, F &&f)
{
    try {
        return f();
    } catch (std::bad_alloc const &) {
        return say(why, -ENOMEM, "%s: out of memory", what);
    } catch (boost::system::system_error const &e) {
        int rc = errno_of(e.code());
        return say(why, rc ? rc : -EIO, "%s: %s", what, e.what());
    } catch (std::exception const &e) {
        return say(why, -EIO, "%s: %s", what, e.what());
    } catch (...) {
        return say(why, -EIO, "%s: unknown failure", what);
    }
}

void copy_str(char *dst, size_t cap, std::string const &src)
{
    std::snprintf(dst, cap, "%s", src.c_str());
}

std::string endpoint_text(lt::tcp::endpoint const &ep)
{
    std::string a = ep.address().to_string();
    if (ep.address().is_v6())
        a = "[" + a + "]";
    return a + ":" + std::to_string(ep.port());
}

void hex(const char *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[(static_cast<unsigned char>(bytes[i]) >> 4) & 0xf];
        out[2 * i + 1] = digits[static_cast<unsigned char>(bytes[i]) & 0xf];
    }
    out[2 * n] = 0;
}

// "dir/name" -> ("dir", "name"); "name" -> (".", "name"); "/name" -> ("/", "name").
void split_path(std::string const &path, std::string &dir, std::string &base)
{
    auto slash = path.rfind('/');
    if (slash == std::string::npos) {
        dir = ".";
        base = path;
    } else {
        dir = slash == 0 ? "/" : path.substr(0, slash);
        base = path.substr(slash + 1);
    }
}

int no_passphrase(char *, int, int, void *)
{
    return 0; // an encrypted key is refused, never asked for on a terminal
}

// The node's certificate and key, checked before libtorrent gets them: it
// would only say so later, in an alert, for each torrent.
int check_identity(std::string const &cert, std::string const &key, lt_why_t *why)
{
    BIO *cb = BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
    BIO *kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
    X509 *x = cb ? PEM_read_bio_X509(cb, nullptr, no_passphrase, nullptr) : nullptr;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, nullptr, no_passphrase, nullptr) : nullptr;
    int rc = 0;
    if (!cb || !kb)
        rc = say(why, -ENOMEM, "out of memory");
    else if (!x)
        rc = say(why, -EINVAL, "cert_pem: not a PEM certificate");
    else if (!k)
        rc = say(why, -EINVAL, "key_pem: not an unencrypted PEM private key");
    else if (X509_check_private_key(x, k) != 1)
        rc = say(why, -EINVAL, "key_pem is not the key of cert_pem");
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    ERR_clear_error();
    return rc;
}

// libtorrent 2.0.8 always hands DH parameters to the torrent's TLS context
// and reports an error when there are none. TLS 1.3 and ECDHE need none;
// for a TLS 1.2 DHE suite, the well-known group is as good as any, and
// costs nothing to make (no generation).
std::string ffdhe2048_pem()
{
    std::string out;
    EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_from_name(nullptr, "DH", nullptr);
    EVP_PKEY *params = nullptr;
    BIO *b = BIO_new(BIO_s_mem());
    if (pc && b && EVP_PKEY_paramgen_init(pc) > 0 &&
        EVP_PKEY_CTX_set_group_name(pc, "ffdhe2048") > 0 && EVP_PKEY_paramgen(pc, &params) > 0 &&
        PEM_write_bio_Parameters(b, params) > 0) {
        char *p = nullptr;
        long n = BIO_get_mem_data(b, &p);
        if (p && n > 0)
            out.assign(p, static_cast<size_t>(n));
    }
    BIO_free(b);
    EVP_PKEY_free(params);
    EVP_PKEY_CTX_free(pc);
    ERR_clear_error();
    return out;
}

lt_event_t event_of(lt_event_kind_t kind, void *user, lt::alert const *a)
{
    lt_event_t e;
    std::memset(&e, 0, sizeof e);
    e.kind = kind;
    e.user = user;
    e.piece = -1;
    copy_str(e.message, sizeof e.message, a->message());
    return e;
}

// One alert into at most one event on s->pending. Alerts of a torrent the
// caller removed (its entry gone) are dropped, except peer ones: an
// incoming connection refused before it reached a torrent has none either.
void fill_stats(lt_torrent_stats_t *st, lt::torrent_status const &ts)
{
    st->bytes_up = static_cast<uint64_t>(ts.total_payload_upload);
    st->bytes_down = static_cast<uint64_t>(ts.total_payload_download);
    st->bytes_done = static_cast<uint64_t>(ts.total_wanted_done);
    st->size = static_cast<uint64_t>(ts.total_wanted);
    st->peers = ts.num_peers;
    st->seeds = ts.num_seeds;
    st->progress_ppm = ts.progress_ppm;
    st->finished = ts.is_finished;
    st->err = errno_of(ts.errc);
}

void convert(lt_session_t *s, lt::alert *a)
{
    if (auto *x = lt::alert_cast<lt::state_update_alert>(a)) {
        for (auto const &ts : x->status) {
            auto e = s->torrents.find(ts.handle);
            if (e != s->torrents.end() && e->second.t)
                fill_stats(&e->second.t->seen, ts);
        }
        return;
    }
    void *user = nullptr;
    bool known = false;
    decltype(s->torrents)::iterator it;
    if (auto *ta = dynamic_cast<lt::torrent_alert *>(a)) {
        it = s->torrents.find(ta->handle);
        known = it != s->torrents.end();
        if (known)
            user = it->second.user;
    }
    if (lt::alert_cast<lt::torrent_finished_alert>(a)) {
        // Every piece passed its hash check, but the last blocks may still
        // wait in the disk queue (a piece is hashed from the buffers it
        // arrived in): finished is told once they are in the file, which
        // hubd reads next.
        if (known)
            it->first.flush_cache();
    } else if (auto *x = lt::alert_cast<lt::cache_flushed_alert>(a)) {
        if (known)
            s->pending.push_back(event_of(LT_EV_FINISHED, user, x));
    } else if (auto *x = lt::alert_cast<lt::hash_failed_alert>(a)) {
        if (known) {
            lt_event_t e = event_of(LT_EV_HASH_FAILED, user, x);
            e.piece = static_cast<int>(x->piece_index);
            s->pending.push_back(e);
        }
    } else if (auto *x = lt::alert_cast<lt::torrent_error_alert>(a)) {
        if (known) {
            lt_event_t e = event_of(LT_EV_TORRENT_ERROR, user, x);
            e.err = errno_of(x->error);
            s->pending.push_back(e);
        }
    } else if (auto *x = lt::alert_cast<lt::file_error_alert>(a)) {
        if (known) {
            lt_event_t e = event_of(LT_EV_FILE_ERROR, user, x);
            e.err = errno_of(x->error);
            s->pending.push_back(e);
        }
    } else if (auto *x = lt::alert_cast<lt::torrent_removed_alert>(a)) {
        if (known) {
            s->pending.push_back(event_of(LT_EV_REMOVED, user, x));
            s->torrents.erase(it);
        }
    } else if (auto *x = lt::alert_cast<lt::peer_ban_alert>(a)) {
        lt_event_t e = event_of(LT_EV_PEER_BANNED, user, x);
        copy_str(e.peer, sizeof e.peer, endpoint_text(x->endpoint));
        s->pending.push_back(e);
    } else if (auto *x = lt::alert_cast<lt::peer_connect_alert>(a)) {
        lt_event_t e = event_of(LT_EV_PEER_CONNECTED, user, x);
        copy_str(e.peer, sizeof e.peer, endpoint_text(x->endpoint));
        s->pending.push_back(e);
    } else if (auto *x = lt::alert_cast<lt::peer_disconnected_alert>(a)) {
        lt_event_t e = event_of(LT_EV_PEER_DISCONNECTED, user, x);
        copy_str(e.peer, sizeof e.peer, endpoint_text(x->endpoint));
        e.tls = is_tls(x->error);
        e.err = x->error == boost::asio::error::eof ? 0 : errno_of(x->error);
        s->pending.push_back(e);
    } else if (auto *x = lt::alert_cast<lt::listen_failed_alert>(a)) {
        lt_event_t e = event_of(LT_EV_LISTEN_FAILED, nullptr, x);
        e.err = errno_of(x->error);
        s->pending.push_back(e);
    }
}

void drain(lt_session_t *s)
{
    std::vector<lt::alert *> alerts;
    s->ses->pop_alerts(&alerts);
    for (lt::alert *a : alerts)
        convert(s, a);
}

} // namespace

extern "C" {

int lt_session_new(const lt_config_t *cfg, lt_session_t **out, lt_why_t *why)
{
    *out = nullptr;
    return guarded(why, "session", [&]() -> int {
        lt::error_code ec;
        lt::address ip = lt::make_address(cfg->listen_ip ? cfg->listen_ip : "", ec);
        if (ec)
            return say(why, -EINVAL, "listen_ip \"%s\": not a numeric address",
                       cfg->listen_ip ? cfg->listen_ip : "");
        if (cfg->tcp_port < -1 || cfg->tcp_port > 65535 || cfg->ssl_port < -1 ||
            cfg->ssl_port > 65535)
            return say(why, -EINVAL, "a port out of range (-1 to 65535)");
        if (cfg->tcp_port < 0 && cfg->ssl_port < 0)
            return say(why, -EINVAL, "neither a plain nor an SSL port to listen on");
        if (!cfg->cert_pem != !cfg->key_pem)
            return say(why, -EINVAL, "a certificate needs its key and a key its certificate");

        auto s = std::make_unique<lt_session>();
        if (cfg->cert_pem) {
            s->cert = cfg->cert_pem;
            s->key = cfg->key_pem;
            int rc = check_identity(s->cert, s->key, why);
            if (rc < 0)
                return rc;
            s->dh = cfg->dh_pem ? cfg->dh_pem : ffdhe2048_pem();
            if (s->dh.empty())
                return say(why, -EIO, "no DH parameters: OpenSSL could not give ffdhe2048");
        }

        // "ip:port" listens for plain peers, "ip:ports" for SSL torrents'.
        std::string host = ip.is_v6() ? "[" + ip.to_string() + "]" : ip.to_string();
        std::string ifaces;
        if (cfg->tcp_port >= 0)
            ifaces = host + ":" + std::to_string(cfg->tcp_port);
        if (cfg->ssl_port >= 0)
            ifaces +=
                (ifaces.empty() ? "" : ",") + host + ":" + std::to_string(cfg->ssl_port) + "s";

        lt::settings_pack sp;
        sp.set_str(lt::settings_pack::listen_interfaces, ifaces);
        // Connections out from the listening address too: a peer knows a
        // node by one address, the one its firewall lets in. From another
        // (the kernel's pick, such as 127.0.0.1 for every node on one
        // machine) the nodes look like one: libtorrent takes one connection
        // per address and torrent, and drops the others'.
        sp.set_str(lt::settings_pack::outgoing_interfaces, ip.to_string());
        sp.set_bool(lt::settings_pack::enable_incoming_utp, false);
        sp.set_bool(lt::settings_pack::enable_outgoing_utp, false);
        sp.set_bool(lt::settings_pack::enable_incoming_tcp, true);
        sp.set_bool(lt::settings_pack::enable_outgoing_tcp, true);
        sp.set_bool(lt::settings_pack::enable_dht, false);
        sp.set_bool(lt::settings_pack::enable_lsd, false);
        sp.set_bool(lt::settings_pack::enable_upnp, false);
        sp.set_bool(lt::settings_pack::enable_natpmp, false);
        sp.set_str(lt::settings_pack::user_agent, "hubd/" HUBD_VERSION);
        // One try at a bound port, never the next ones up: port 0 is how
        // hubd asks for any.
        sp.set_int(lt::settings_pack::max_retry_port_bind, 0);
        // Every peer is a member the cluster's CA vouched for: tit-for-tat,
        // whose fixed 8 unchoke slots kept a seed's upload to 8 of its 15
        // to 63 members at a time, guards against nobody here.
        sp.set_int(lt::settings_pack::unchoke_slots_limit, -1);
        if (cfg->max_connections > 0)
            sp.set_int(lt::settings_pack::connections_limit, cfg->max_connections);
        sp.set_int(
            lt::settings_pack::alert_mask,
            static_cast<int>(static_cast<std::uint32_t>(
                lt::alert_category::status | lt::alert_category::error | lt::alert_category::peer |
                lt::alert_category::connect | lt::alert_category::storage)));

        s->ses = std::make_unique<lt::session>(lt::session_params(std::move(sp)));

        // A listener asked for and not open: say why, from libtorrent's alert.
        bool tcp_ok = cfg->tcp_port < 0 || s->ses->listen_port() != 0;
        bool ssl_ok = cfg->ssl_port < 0 || s->ses->ssl_listen_port() != 0;
        if (!tcp_ok || !ssl_ok) {
            drain(s.get());
            for (auto const &e : s->pending)
                if (e.kind == LT_EV_LISTEN_FAILED)
                    return say(why, e.err ? e.err : -EADDRNOTAVAIL, "%s", e.message);
            return say(why, -EADDRNOTAVAIL, "cannot listen on %s", ifaces.c_str());
        }
        if (cfg->notify) {
            void (*fn)(void *) = cfg->notify;
            void *arg = cfg->notify_arg;
            s->ses->set_alert_notify([fn, arg] { fn(arg); });
        }
        *out = s.release();
        return 0;
    });
}

int lt_session_ports(lt_session_t *s, int *tcp_port, int *ssl_port)
{
    return guarded(nullptr, "ports", [&]() -> int {
        if (tcp_port)
            *tcp_port = s->ses->listen_port();
        if (ssl_port)
            *ssl_port = s->ses->ssl_listen_port();
        return 0;
    });
}

void lt_session_free(lt_session_t *s)
{
    if (!s)
        return;
    try {
        // Under the alert queue's lock: no notify call runs after this.
        s->ses->set_alert_notify(std::function<void()>());
    } catch (...) {
    }
    for (auto &kv : s->torrents)
        delete kv.second.t;
    try {
        // No new peer, then none at all, while every torrent and its SSL
        // context still stands: destroyed with SSL connections up (an
        // incoming one mid-handshake among them), libtorrent 2.0.8's
        // network thread now and then crashed in OpenSSL's BIO_ctrl_pending.
        lt::settings_pack sp;
        sp.set_str(lt::settings_pack::listen_interfaces, "");
        s->ses->apply_settings(sp);
        s->ses->pause();
        for (int i = 0; i < FREE_DRAIN_TRIES; i++) {
            int peers = 0;
            for (auto const &ts : s->ses->get_torrent_status(
                     [](lt::torrent_status const &) { return true; }, lt::status_flags_t{}))
                peers += ts.num_peers;
            if (peers == 0 && i >= FREE_DRAIN_MIN)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(FREE_DRAIN_STEP_MS));
        }
    } catch (...) {
    }
    try {
        s->ses.reset(); // waits for libtorrent's threads to finish
    } catch (...) {
    }
    delete s;
}

int lt_torrent_make(const lt_make_params_t *p, lt_metadata_t *out, lt_why_t *why)
{
    std::memset(out, 0, sizeof *out);
    return guarded(why, "make", [&]() -> int {
        struct stat st;
        if (!p->path || stat(p->path, &st) != 0)
            return say(why, p->path ? -errno : -EINVAL, "%s: %s", p->path ? p->path : "(null)",
                       std::strerror(p->path ? errno : EINVAL));
        if (S_ISDIR(st.st_mode))
            return say(why, -EISDIR, "%s: a directory", p->path);
        if (!S_ISREG(st.st_mode))
            return say(why, -EINVAL, "%s: not a regular file", p->path);
        if (static_cast<uint64_t>(st.st_size) != p->size)
            return say(why, -ESTALE, "%s: %lld bytes on disk, %llu expected", p->path,
                       static_cast<long long>(st.st_size),
                       static_cast<unsigned long long>(p->size));
        if (p->size == 0)
            return say(why, -EINVAL, "%s: an empty file makes no torrent", p->path);
        if (p->piece_size != 0 &&
            (p->piece_size < 16384 || (p->piece_size & (p->piece_size - 1)) != 0))
            return say(why, -EINVAL, "piece size %d: not a power of two of 16 KiB or more",
                       p->piece_size);
        std::string dir, base;
        split_path(p->path, dir, base);
        if (base.empty())
            return say(why, -EINVAL, "%s: no file name", p->path);

        lt::file_storage fs;
        fs.add_file(base, static_cast<std::int64_t>(p->size));
        lt::create_torrent ct(fs, p->piece_size,
                              p->hybrid ? lt::create_flags_t{} : lt::create_torrent::v2_only);
        if (p->ca_pem)
            ct.set_root_cert(p->ca_pem);
        ct.set_creation_date(0); // the same bytes from every node
        lt::error_code ec;
        lt::set_piece_hashes(ct, dir, ec);
        if (ec)
            return say(why, errno_of(ec), "%s: hashing: %s", p->path, ec.message().c_str());
        std::vector<char> buf = ct.generate_buf();
        lt::torrent_info ti(buf, lt::from_span);
        lt::info_hash_t ih = ti.info_hashes();

        out->bytes = static_cast<unsigned char *>(std::malloc(buf.size()));
        if (!out->bytes)
            return say(why, -ENOMEM, "make: out of memory");
        std::memcpy(out->bytes, buf.data(), buf.size());
        out->len = buf.size();
        if (ih.has_v2())
            hex(ih.v2.data(), ih.v2.size(), out->info_hash);
        if (ih.has_v1())
            hex(ih.v1.data(), ih.v1.size(), out->info_hash_v1);
        return 0;
    });
}

int lt_torrent_add(lt_session_t *s, const lt_add_params_t *p, lt_torrent_t **out, lt_why_t *why)
{
    *out = nullptr;
    return guarded(why, "add", [&]() -> int {
        if (!p->torrent || !p->path || (p->mode != LT_ADD_SEED && p->mode != LT_ADD_CHECK))
            return say(why, -EINVAL, "add: no metadata, no path or an unknown mode");
        lt::error_code ec;
        auto ti = std::make_shared<lt::torrent_info>(
            lt::span<char const>(reinterpret_cast<char const *>(p->torrent),
                                 static_cast<std::ptrdiff_t>(p->torrent_len)),
            ec, lt::from_span);
        if (ec)
            return say(why, -EINVAL, "not a torrent: %s", ec.message().c_str());
        // One file (pad files are not on disk): hubd's unit is a blob.
        lt::file_storage const &fs = ti->files();
        int nfiles = 0;
        lt::file_index_t only{0};
        for (auto i : fs.file_range())
            if (!fs.pad_file_at(i)) {
                nfiles++;
                only = i;
            }
        if (nfiles != 1)
            return say(why, -EINVAL, "a torrent of %d files, not one", nfiles);
        bool ssl = !ti->ssl_cert().empty();
        if (ssl && s->cert.empty())
            return say(why, -EINVAL, "an SSL torrent, and this session has no certificate");

        std::string dir, base;
        split_path(p->path, dir, base);
        if (base.empty())
            return say(why, -EINVAL, "%s: no file name", p->path);
        lt::add_torrent_params atp;
        atp.ti = ti;
        atp.save_path = dir;
        atp.renamed_files[only] = base; // the file is where hubd says, whatever its name
        // Paused until the certificate is set: a torrent without one would
        // stall its connections.
        atp.flags = (lt::torrent_flags::default_flags & ~lt::torrent_flags::auto_managed) |
                    lt::torrent_flags::paused | lt::torrent_flags::duplicate_is_error;
        if (p->mode == LT_ADD_SEED)
            atp.flags |= lt::torrent_flags::seed_mode;
        if (p->tracker && *p->tracker)
            atp.trackers.push_back(p->tracker);
        lt::torrent_handle h = s->ses->add_torrent(std::move(atp), ec);
        if (ec == lt::errors::duplicate_torrent)
            return say(why, -EEXIST, "this torrent is in the session already");
        if (ec)
            return say(why, errno_of(ec), "add: %s", ec.message().c_str());

        // From here until the entry is recorded, a throw must take the
        // torrent out again: else libtorrent keeps a torrent the caller was
        // told failed (and a later add of it is -EEXIST).
        try {
            auto t = std::make_unique<lt_torrent>();
            t->s = s;
            t->h = h;
            if (ssl)
                h.set_ssl_certificate_buffer(s->cert, s->key, s->dh);
            h.resume();
            s->torrents[h] = entry{p->user, t.get()}; // last: nothing after it throws
            *out = t.release();
            return 0;
        } catch (...) {
            try {
                s->ses->remove_torrent(h);
            } catch (...) {
            }
            throw;
        }
    });
}

int lt_torrent_size(const unsigned char *torrent, size_t len, uint64_t *size)
{
    *size = 0;
    return guarded(nullptr, "size", [&]() -> int {
        lt::error_code ec;
        lt::torrent_info ti(lt::span<char const>(reinterpret_cast<char const *>(torrent),
                                                 static_cast<std::ptrdiff_t>(len)),
                            ec, lt::from_span);
        if (ec)
            return -EINVAL;
        lt::file_storage const &fs = ti.files();
        int nfiles = 0;
        std::int64_t total = 0;
        for (auto i : fs.file_range())
            if (!fs.pad_file_at(i)) {
                nfiles++;
                total = fs.file_size(i);
            }
        if (nfiles != 1 || total < 0)
            return -EINVAL;
        *size = static_cast<uint64_t>(total);
        return 0;
    });
}

int lt_torrent_add_peer(lt_torrent_t *t, const char *ip, int port, lt_why_t *why)
{
    return guarded(why, "peer", [&]() -> int {
        lt::error_code ec;
        lt::address a = lt::make_address(ip ? ip : "", ec);
        if (ec || port <= 0 || port > 65535)
            return say(why, -EINVAL, "peer %s:%d: not a numeric address and port", ip ? ip : "",
                       port);
        t->h.connect_peer(lt::tcp::endpoint(a, static_cast<std::uint16_t>(port)));
        return 0;
    });
}

int lt_torrent_stats(lt_torrent_t *t, lt_torrent_stats_t *st)
{
    std::memset(st, 0, sizeof *st);
    return guarded(nullptr, "stats", [&]() -> int {
        fill_stats(st, t->h.status(lt::status_flags_t{}));
        return 0;
    });
}

void lt_torrent_stats_seen(const lt_torrent_t *t, lt_torrent_stats_t *st)
{
    *st = t->seen;
}

void lt_session_post_updates(lt_session_t *s)
{
    guarded(nullptr, "updates", [&]() -> int {
        s->ses->post_torrent_updates(lt::status_flags_t{});
        return 0;
    });
}

int lt_torrent_peers(lt_torrent_t *t, lt_peer_info_t *out, int cap)
{
    int n = 0;
    guarded(nullptr, "peers", [&]() -> int {
        std::vector<lt::peer_info> v;
        t->h.get_peer_info(v);
        for (auto const &pi : v) {
            if (n >= cap)
                break;
            lt_peer_info_t &o = out[n++];
            std::memset(&o, 0, sizeof o);
            copy_str(o.peer, sizeof o.peer, endpoint_text(pi.ip));
            o.bytes_up = static_cast<uint64_t>(pi.total_upload);
            o.bytes_down = static_cast<uint64_t>(pi.total_download);
            o.seed = static_cast<bool>(pi.flags & lt::peer_info::seed);
        }
        return 0;
    });
    return n;
}

void lt_torrent_remove(lt_torrent_t *t)
{
    lt_session_t *s = t->s;
    auto it = s->torrents.find(t->h);
    try {
        s->ses->remove_torrent(t->h); // the file stays
        if (it != s->torrents.end())
            it->second.t = nullptr;
    } catch (...) {
        // libtorrent lost it already: the caller still gets its one REMOVED.
        if (it != s->torrents.end()) {
            lt_event_t e;
            std::memset(&e, 0, sizeof e);
            e.kind = LT_EV_REMOVED;
            e.user = it->second.user;
            e.piece = -1;
            try { // no exception may leave an extern "C" function
                s->pending.push_back(e);
            } catch (...) {
            }
            s->torrents.erase(it);
        }
    }
    delete t;
}

int lt_session_stats(lt_session_t *s, lt_session_stats_t *st)
{
    std::memset(st, 0, sizeof *st);
    return guarded(nullptr, "stats", [&]() -> int {
        std::vector<lt::torrent_status> all = s->ses->get_torrent_status(
            [](lt::torrent_status const &) { return true; }, lt::status_flags_t{});
        for (auto const &ts : all) {
            st->torrents++;
            st->peers += ts.num_peers;
            st->bytes_up += static_cast<uint64_t>(ts.total_payload_upload);
            st->bytes_down += static_cast<uint64_t>(ts.total_payload_download);
        }
        return 0;
    });
}

int lt_session_poll(lt_session_t *s, lt_event_t *ev, int cap)
{
    if (cap <= 0)
        return 0;
    try {
        drain(s);
    } catch (...) {
        // Out of memory while converting: what was converted stays, the
        // rest of that batch of alerts is lost (libtorrent hands them over
        // once); lt_torrent_stats stays the truth about each torrent.
    }
    int n = 0;
    while (n < cap && !s->pending.empty()) {
        ev[n++] = s->pending.front();
        s->pending.pop_front();
    }
    return n;
}

const char *lt_event_name(lt_event_kind_t kind)
{
    switch (kind) {
    case LT_EV_FINISHED:
        return "finished";
    case LT_EV_HASH_FAILED:
        return "hash_failed";
    case LT_EV_PEER_BANNED:
        return "peer_banned";
    case LT_EV_TORRENT_ERROR:
        return "torrent_error";
    case LT_EV_FILE_ERROR:
        return "file_error";
    case LT_EV_PEER_CONNECTED:
        return "peer_connected";
    case LT_EV_PEER_DISCONNECTED:
        return "peer_disconnected";
    case LT_EV_REMOVED:
        return "removed";
    case LT_EV_LISTEN_FAILED:
        return "listen_failed";
    }
    return "unknown";
}

} // extern "C"
