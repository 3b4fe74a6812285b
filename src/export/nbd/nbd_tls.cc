// TLS credentials and sessions for the NBD server: see nbd_tls.h.
#include "export/nbd/nbd_tls.h"

#include <gnutls/gnutls.h>
#include <sys/stat.h>

#include <cctype>
#include <fstream>

namespace volstack::exportfs::nbd {

namespace {

// "NORMAL" as nbdkit; PSK key exchanges are not in NORMAL and are added for PSK.
constexpr char kPriorityX509[] = "NORMAL";
constexpr char kPriorityPsk[] = "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK";

Status GnutlsStatus(const std::string& what, int code) {
  return Status::InvalidArgument(what + ": " + gnutls_strerror(code));
}

bool IsRegularReadable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), R_OK) == 0;
}

// One "IDENTITY:HEXKEY" per line (psktool); an empty file or a bad line is refused here so
// the error names the line, not a handshake failure later.
Status CheckPskFile(const std::string& file) {
  if (!IsRegularReadable(file)) {
    return Status::InvalidArgument("nbd: --tls-psk " + file + ": not a readable file");
  }
  std::ifstream in(file);
  std::string line;
  size_t lineno = 0, keys = 0;
  while (std::getline(in, line)) {
    lineno++;
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    const std::string key = colon == std::string::npos ? "" : line.substr(colon + 1);
    bool hex = !key.empty() && key.size() % 2 == 0;
    for (char c : key) hex = hex && std::isxdigit(static_cast<unsigned char>(c));
    if (colon == 0 || !hex) {
      return Status::InvalidArgument("nbd: --tls-psk " + file + ": line " + std::to_string(lineno) +
                                     " is not IDENTITY:HEXKEY (make keys with psktool)");
    }
    keys++;
  }
  if (keys == 0) return Status::InvalidArgument("nbd: --tls-psk " + file + ": no keys");
  return Status::Ok();
}

}  // namespace

Result<TlsMode> ParseTlsMode(std::string_view text) {
  if (text == "off" || text == "no" || text == "false") return TlsMode::kOff;
  if (text == "on" || text == "yes" || text == "true") return TlsMode::kOn;
  if (text == "require") return TlsMode::kRequire;
  return Status::InvalidArgument("nbd: --tls=" + std::string(text) +
                                 ": expected off, on or require");
}

const char* TlsModeName(TlsMode mode) {
  switch (mode) {
    case TlsMode::kOff:
      return "off";
    case TlsMode::kOn:
      return "on";
    case TlsMode::kRequire:
      return "require";
    case TlsMode::kDefault:
      break;
  }
  return "";
}

Result<TlsMode> ResolveTlsMode(TlsMode mode, bool tcp, const std::string& psk_file,
                               const std::string& certificates_dir) {
  const bool creds = !psk_file.empty() || !certificates_dir.empty();
  if (!psk_file.empty() && !certificates_dir.empty()) {
    return Status::InvalidArgument("nbd: give --tls-psk or --tls-certificates, not both");
  }
  switch (mode) {
    case TlsMode::kDefault:
      if (creds) return TlsMode::kRequire;
      if (tcp) {
        return Status::InvalidArgument(
            "nbd: a TCP listener needs TLS: give --tls-psk FILE or --tls-certificates DIR, "
            "or --tls=off to serve anyone who can reach the port in plaintext");
      }
      return TlsMode::kOff;
    case TlsMode::kOff:
      if (creds) {
        return Status::InvalidArgument("nbd: --tls=off with TLS credentials: drop one of them");
      }
      return TlsMode::kOff;
    case TlsMode::kOn:
    case TlsMode::kRequire:
      if (!creds) {
        return Status::InvalidArgument(std::string("nbd: --tls=") + TlsModeName(mode) +
                                       " needs --tls-psk FILE or --tls-certificates DIR");
      }
      return mode;
  }
  return mode;
}

Result<std::unique_ptr<TlsCredentials>> TlsCredentials::LoadPsk(const std::string& file) {
  VS_RETURN_IF_ERROR(CheckPskFile(file));
  std::unique_ptr<TlsCredentials> c(new TlsCredentials);
  c->psk_ = true;
  gnutls_psk_server_credentials_t cred;
  int r = gnutls_psk_allocate_server_credentials(&cred);
  if (r < 0) return GnutlsStatus("nbd: TLS PSK credentials", r);
  c->cred_ = cred;
  r = gnutls_psk_set_server_credentials_file(cred, file.c_str());
  if (r < 0) return GnutlsStatus("nbd: --tls-psk " + file, r);
  return c;
}

Result<std::unique_ptr<TlsCredentials>> TlsCredentials::LoadX509(const std::string& dir,
                                                                 bool verify_peer) {
  const std::string cert = dir + "/server-cert.pem", key = dir + "/server-key.pem",
                    ca = dir + "/ca-cert.pem";
  for (const auto& f : {cert, key}) {
    if (!IsRegularReadable(f)) {
      return Status::InvalidArgument("nbd: --tls-certificates " + dir + ": " + f +
                                     " is missing or unreadable (the directory holds "
                                     "server-cert.pem, server-key.pem and ca-cert.pem)");
    }
  }
  if (verify_peer && !IsRegularReadable(ca)) {
    return Status::InvalidArgument("nbd: --tls-verify-peer needs " + ca +
                                   " (the CA that signs the clients' certificates)");
  }
  std::unique_ptr<TlsCredentials> c(new TlsCredentials);
  c->verify_peer_ = verify_peer;
  gnutls_certificate_credentials_t cred;
  int r = gnutls_certificate_allocate_credentials(&cred);
  if (r < 0) return GnutlsStatus("nbd: TLS certificate credentials", r);
  c->cred_ = cred;
  if (IsRegularReadable(ca)) {
    r = gnutls_certificate_set_x509_trust_file(cred, ca.c_str(), GNUTLS_X509_FMT_PEM);
    if (r < 0) return GnutlsStatus("nbd: " + ca, r);
    // The number of certificates loaded: none would refuse every client.
    if (r == 0 && verify_peer) {
      return Status::InvalidArgument("nbd: --tls-verify-peer: " + ca + " holds no certificate");
    }
  }
  r = gnutls_certificate_set_x509_key_file(cred, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM);
  if (r < 0) return GnutlsStatus("nbd: " + cert + " with " + key, r);
  return c;
}

TlsCredentials::~TlsCredentials() {
  if (cred_ == nullptr) return;
  if (psk_) {
    gnutls_psk_free_server_credentials(static_cast<gnutls_psk_server_credentials_t>(cred_));
  } else {
    gnutls_certificate_free_credentials(static_cast<gnutls_certificate_credentials_t>(cred_));
  }
}

Result<std::unique_ptr<TlsSession>> TlsCredentials::Handshake(int fd) const {
  gnutls_session_t s;
  int r = gnutls_init(&s, GNUTLS_SERVER);
  if (r < 0) return GnutlsStatus("tls init", r);
  auto session = std::make_unique<TlsSession>(s);
  r = gnutls_priority_set_direct(s, psk_ ? kPriorityPsk : kPriorityX509, nullptr);
  if (r < 0) return GnutlsStatus("tls priority", r);
  r = gnutls_credentials_set(s, psk_ ? GNUTLS_CRD_PSK : GNUTLS_CRD_CERTIFICATE, cred_);
  if (r < 0) return GnutlsStatus("tls credentials", r);
  if (!psk_) {
    gnutls_certificate_server_set_request(s,
                                          verify_peer_ ? GNUTLS_CERT_REQUIRE : GNUTLS_CERT_IGNORE);
    // GnuTLS verifies the client's chain against the trust file during the handshake.
    if (verify_peer_) gnutls_session_set_verify_cert(s, nullptr, 0);
  }
  gnutls_transport_set_int(s, fd);
  do {
    r = gnutls_handshake(s);
  } while (r < 0 && gnutls_error_is_fatal(r) == 0);
  if (r >= 0) return session;
  // TLS 1.3 says CERTIFICATE_REQUIRED, TLS 1.2 NO_CERTIFICATE_FOUND. A client holding only
  // another CA's certificate sends none: the server's request names the CAs it accepts.
  if (verify_peer_ && (r == GNUTLS_E_NO_CERTIFICATE_FOUND || r == GNUTLS_E_CERTIFICATE_REQUIRED)) {
    return Status::FromErrno(EACCES,
                             "client refused: it sent no TLS certificate signed by ca-cert.pem "
                             "(--tls-verify-peer)");
  }
  if (verify_peer_ && r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
    std::string why = "not trusted";
    gnutls_datum_t text{};
    if (gnutls_certificate_verification_status_print(gnutls_session_get_verify_cert_status(s),
                                                     GNUTLS_CRT_X509, &text, 0) == 0) {
      why.assign(reinterpret_cast<const char*>(text.data), text.size);
      gnutls_free(text.data);
      while (!why.empty() && (std::isspace(static_cast<unsigned char>(why.back())) ||
                              why.back() == '.' || why.back() == '\0')) {
        why.pop_back();
      }
    }
    return Status::FromErrno(
        EACCES, "client refused: its TLS certificate is not signed by ca-cert.pem (" + why + ")");
  }
  return Status::FromErrno(EACCES, std::string("TLS handshake failed: ") + gnutls_strerror(r));
}

TlsSession::~TlsSession() { gnutls_deinit(session_); }

void TlsSession::Bye() { gnutls_bye(session_, GNUTLS_SHUT_WR); }

}  // namespace volstack::exportfs::nbd
