// TLS for the NBD server (GnuTLS), as nbdkit and qemu-nbd offer it: the client asks with
// NBD_OPT_STARTTLS during option haggling, the server answers ACK, and both run a TLS
// handshake on the socket; everything after (more options, then transmission) is encrypted.
//
// Credentials, loaded once when a listener starts:
//   PSK    --tls-psk FILE: psktool's format, one "IDENTITY:HEXKEY" per line.
//   X.509  --tls-certificates DIR: server-cert.pem and server-key.pem (the server's
//          certificate chain and key), ca-cert.pem optional (trust for client
//          certificates), the layout of nbdkit and qemu's tls-creds-x509.
//   --tls-verify-peer (X.509 only, as nbdkit's): a client must present a certificate that
//          ca-cert.pem (then required) signs; one without, or with another, is refused at
//          the TLS handshake, before any option is heard. Client certificates are not
//          checked for a host name: the CA's signature is the authorisation.
//
// Threads: TlsCredentials is immutable after Load and shared by every connection;
// TlsSession belongs to one connection.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

struct gnutls_session_int;
typedef struct gnutls_session_int* gnutls_session_t;

namespace volstack::exportfs::nbd {

// kOff: STARTTLS is refused. kOn: offered, plaintext clients still served. kRequire: every
// option but STARTTLS and ABORT is refused with ERR_TLS_REQD until TLS is up.
// kDefault: not given; NbdServer::Start resolves it (ResolveTlsMode).
enum class TlsMode { kDefault, kOff, kOn, kRequire };

// "off", "on", "require" (also nbdkit's "no"/"yes"/"false"/"true"). InvalidArgument else.
Result<TlsMode> ParseTlsMode(std::string_view text);
const char* TlsModeName(TlsMode mode);  // "off", "on", "require" ("" for kDefault)

// The mode a listener runs with. A TCP listener without TLS is refused unless the mode is
// an explicit kOff; credentials without a mode mean kRequire; on/require need credentials
// (exactly one kind), off takes none. A Unix socket (mode 0600) defaults to off.
Result<TlsMode> ResolveTlsMode(TlsMode mode, bool tcp, const std::string& psk_file,
                               const std::string& certificates_dir);

class TlsSession;

class TlsCredentials {
 public:
  // Loads and checks the credentials; a missing or malformed file is one clear error.
  static Result<std::unique_ptr<TlsCredentials>> LoadPsk(const std::string& file);
  // `verify_peer`: client certificates are required and verified against dir/ca-cert.pem.
  static Result<std::unique_ptr<TlsCredentials>> LoadX509(const std::string& dir,
                                                          bool verify_peer = false);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // Runs the server side of a TLS handshake on `fd` (blocking; the caller bounds it by
  // shutting the socket down). On failure nothing is left to clean up; a client refused by
  // --tls-verify-peer is EACCES saying why in one sentence.
  Result<std::unique_ptr<TlsSession>> Handshake(int fd) const;

 private:
  TlsCredentials() = default;
  bool psk_ = false;
  bool verify_peer_ = false;
  void* cred_ = nullptr;  // gnutls_psk_server_credentials_t or gnutls_certificate_credentials_t
};

class TlsSession {
 public:
  explicit TlsSession(gnutls_session_t s) : session_(s) {}
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  gnutls_session_t get() const { return session_; }
  // Sends close_notify (best effort, the peer may be gone).
  void Bye();

 private:
  gnutls_session_t session_;
};

}  // namespace volstack::exportfs::nbd
