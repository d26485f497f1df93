#include "sigv4/chunked.h"

#include <algorithm>
#include <utility>

#include "sigv4/crypto.h"
#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kSignatureExtension = "chunk-signature=";
constexpr std::string_view kTrailerSignature = "x-amz-trailer-signature";
constexpr std::size_t kMaxSizeDigits = 16;  // a uint64_t

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  }
  return out;
}

// 1 to 16 hex digits: at most 2^64 - 1, so no overflow.
bool ParseHexSize(std::string_view digits, std::uint64_t* size) {
  if (digits.empty() || digits.size() > kMaxSizeDigits) return false;
  std::uint64_t n = 0;
  for (char c : digits) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return false;
    n = n << 4 | static_cast<std::uint64_t>(d);
  }
  *size = n;
  return true;
}

// The body front to back. A truncated body is kIncompleteBody; bytes that
// cannot be what the grammar wants there are kBadChunk.
class Cursor {
 public:
  explicit Cursor(std::string_view rest) : rest_(rest) {}

  bool empty() const { return rest_.empty(); }

  // The next line, without its CRLF (consumed), of at most kMaxChunkLine.
  std::error_code Line(std::string_view* line) {
    std::size_t window = kMaxChunkLine + kCrlf.size();
    std::size_t end = rest_.substr(0, window).find(kCrlf);
    if (end == std::string_view::npos) {
      return rest_.size() < window ? Errc::kIncompleteBody : Errc::kBadChunk;
    }
    *line = rest_.substr(0, end);
    rest_.remove_prefix(end + kCrlf.size());
    return {};
  }

  std::error_code Take(std::uint64_t size, std::string_view* data) {
    if (size > rest_.size()) return Errc::kIncompleteBody;
    *data = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return {};
  }

  std::error_code Crlf() {
    if (rest_.starts_with(kCrlf)) {
      rest_.remove_prefix(kCrlf.size());
      return {};
    }
    return kCrlf.starts_with(rest_) ? Errc::kIncompleteBody : Errc::kBadChunk;
  }

  // Skips an empty line that something follows.
  bool SkipBlankBeforeMore() {
    if (rest_.size() <= kCrlf.size() || !rest_.starts_with(kCrlf)) return false;
    rest_.remove_prefix(kCrlf.size());
    return true;
  }

 private:
  std::string_view rest_;
};

// The one checksum x-amz-trailer announces ("x-amz-checksum-crc32c"; a
// comma-separated list in general, as HTTP's Trailer is).
std::error_code Announced(std::string_view header,
                          ChecksumAlgorithm* algorithm) {
  std::optional<ChecksumAlgorithm> found;
  while (!header.empty()) {
    std::size_t comma = header.find(',');
    std::string_view name = TrimSpaces(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view()
                                             : header.substr(comma + 1);
    if (name.empty()) continue;
    auto a = ChecksumFromHeaderName(name);
    if (!a) return Errc::kUnsupportedChecksum;
    if (found) return Errc::kChecksumConflict;
    found = a;
  }
  if (!found) return Errc::kMissingChecksum;
  *algorithm = *found;
  return {};
}

// One decoding: the chunks, then the end or the trailer.
class Decoder {
 public:
  Decoder(std::string_view body, const ChunkedCheck& check, ChunkedBody* out)
      : in_(body), body_size_(body.size()), check_(check), out_(out) {}

  std::error_code Run() {
    bool signed_kind = check_.kind != PayloadKind::kUnsignedTrailer;
    bool trailer = check_.kind != PayloadKind::kSigned;
    if (signed_kind) {
      signer_.emplace(check_.signing_key, check_.amz_date, check_.scope,
                      check_.seed_signature);
    }
    if (trailer) {
      ChecksumAlgorithm algorithm;
      if (auto ec = Announced(check_.trailer_header, &algorithm)) return ec;
      checksum_.emplace(algorithm);
    }
    if (auto ec = Chunks()) return ec;
    if (!trailer) {
      if (auto ec = in_.Crlf()) return ec;
      return in_.empty() ? std::error_code() : Errc::kBadChunk;
    }
    return Trailer();
  }

 private:
  // "<hex size>[;chunk-signature=<sig>]": the size, and the signature when
  // the kind is signed.
  std::error_code ChunkLine(std::string_view line, std::uint64_t* size,
                            std::string_view* signature) {
    std::size_t semicolon = line.find(';');
    if (!ParseHexSize(line.substr(0, semicolon), size)) return Errc::kBadChunk;
    if (!signer_) {
      return semicolon == std::string_view::npos ? std::error_code()
                                                 : Errc::kBadChunk;
    }
    if (semicolon == std::string_view::npos) {
      return Errc::kChunkSignatureMismatch;
    }
    std::string_view extension = line.substr(semicolon + 1);
    if (!extension.starts_with(kSignatureExtension)) {
      return Errc::kChunkSignatureMismatch;
    }
    *signature = extension.substr(kSignatureExtension.size());
    return {};
  }

  // Every chunk up to and including the final empty one, whose signature is
  // checked like the others: a body cut after any chunk is not a body the
  // client signed.
  std::error_code Chunks() {
    std::optional<std::uint64_t> declared = check_.decoded_length;
    // Never more than the body holds, whatever the header says.
    out_->data.reserve(
        std::min<std::uint64_t>(declared.value_or(0), body_size_));
    std::uint64_t total = 0;
    while (true) {
      std::string_view line, signature, data;
      std::uint64_t size = 0;
      if (auto ec = in_.Line(&line)) return ec;
      if (auto ec = ChunkLine(line, &size, &signature)) return ec;
      if (declared && size > *declared - total) return Errc::kLengthMismatch;
      if (auto ec = in_.Take(size, &data)) return ec;
      if (signer_) {
        last_signature_ = signer_->Next(data);
        if (!ConstantTimeEqual(last_signature_, signature)) {
          return Errc::kChunkSignatureMismatch;
        }
      }
      if (size == 0) break;
      if (auto ec = in_.Crlf()) return ec;
      out_->data.append(data);
      if (checksum_) checksum_->Update(data);
      total += size;
    }
    if (declared && total != *declared) return Errc::kLengthMismatch;
    return {};
  }

  // The trailer lines up to the empty line that ends the body.
  std::error_code Trailer() {
    bool leading_blank = in_.SkipBlankBeforeMore();
    std::string_view name = ChecksumHeaderName(checksum_->algorithm());
    std::optional<std::string> value, signature;
    while (!(leading_blank && in_.empty())) {
      std::string_view line;
      if (auto ec = in_.Line(&line)) return ec;
      if (line.empty()) {
        if (!in_.empty()) return Errc::kBadChunk;
        break;
      }
      std::size_t colon = line.find(':');
      if (colon == 0 || colon == std::string_view::npos || signature) {
        return Errc::kBadTrailer;
      }
      std::string field = Lower(line.substr(0, colon));
      std::string field_value(TrimSpaces(line.substr(colon + 1)));
      if (signer_ && field == kTrailerSignature) {
        signature = std::move(field_value);
      } else if (field == name && !value) {
        value = std::move(field_value);
      } else {
        return Errc::kBadTrailer;
      }
    }
    if (signer_) {
      std::string canonical;
      if (value) canonical.append(name).append(":").append(*value).append("\n");
      std::string expected = Signature(
          check_.signing_key, TrailerStringToSign(check_.amz_date, check_.scope,
                                                  last_signature_, canonical));
      if (!signature || !ConstantTimeEqual(expected, *signature)) {
        return Errc::kChunkSignatureMismatch;
      }
    }
    if (!value) return Errc::kMissingChecksum;
    std::string actual = checksum_->Base64Digest();
    if (*value != actual) return Errc::kChecksumMismatch;
    out_->checksum_algorithm = checksum_->algorithm();
    out_->checksum = std::move(actual);
    return {};
  }

  Cursor in_;
  std::size_t body_size_;
  const ChunkedCheck& check_;
  ChunkedBody* out_;
  std::optional<ChunkSigner> signer_;
  std::optional<Checksum> checksum_;
  std::string last_signature_;
};

}  // namespace

std::optional<PayloadKind> StreamingPayloadKind(
    std::string_view content_sha256) {
  if (content_sha256 == kStreamingPayload) return PayloadKind::kSigned;
  if (content_sha256 == kStreamingPayloadTrailer) {
    return PayloadKind::kSignedTrailer;
  }
  if (content_sha256 == kStreamingUnsignedTrailer) {
    return PayloadKind::kUnsignedTrailer;
  }
  return std::nullopt;
}

std::string TrailerStringToSign(std::string_view amz_date, const Scope& scope,
                                std::string_view previous_signature,
                                std::string_view canonical_trailer) {
  std::string out(kTrailerAlgorithm);
  out.append("\n").append(amz_date).append("\n");
  out.append(ScopeString(scope)).append("\n");
  out.append(previous_signature).append("\n");
  out.append(HexSha256(canonical_trailer));
  return out;
}

std::error_code DecodeAwsChunked(std::string_view body,
                                 const ChunkedCheck& check, ChunkedBody* out) {
  *out = ChunkedBody();
  return Decoder(body, check, out).Run();
}

}  // namespace fencepost::sigv4
