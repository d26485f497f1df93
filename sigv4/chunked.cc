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
// A line and its CRLF: that many bytes without a CRLF are refused.
constexpr std::size_t kLineWindow = kMaxChunkLine + kCrlf.size();
// A hex HMAC-SHA256: a claimed signature of another length never matches,
// so only that verdict is kept, not its bytes.
constexpr std::size_t kSignatureSize = 64;

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

// "<hex size>[;chunk-signature=<sig>]": the size, and the signature when
// the kind is signed.
std::error_code ChunkLine(std::string_view line, bool signed_kind,
                          std::uint64_t* size, std::string_view* signature) {
  std::size_t semicolon = line.find(';');
  if (!ParseHexSize(line.substr(0, semicolon), size)) return Errc::kBadChunk;
  if (!signed_kind) {
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
  ChunkedDecoder decoder(check);
  // Never more than the body holds, whatever the header says.
  out->data.reserve(
      std::min<std::uint64_t>(check.decoded_length.value_or(0), body.size()));
  if (auto ec = decoder.Feed(body, &out->data)) return ec;
  if (auto ec = decoder.Finish()) return ec;
  out->checksum_algorithm = decoder.checksum_algorithm();
  out->checksum = decoder.checksum();
  return {};
}

ChunkedDecoder::ChunkedDecoder(ChunkedCheck check) : check_(std::move(check)) {
  if (check_.kind != PayloadKind::kUnsignedTrailer) {
    signer_.emplace(check_.signing_key, check_.amz_date, check_.scope,
                    check_.seed_signature);
  }
  if (check_.kind != PayloadKind::kSigned) {
    ChecksumAlgorithm algorithm;
    error_ = Announced(check_.trailer_header, &algorithm);
    if (!error_) checksum_.emplace(algorithm);
  }
}

std::optional<ChecksumAlgorithm> ChunkedDecoder::checksum_algorithm() const {
  if (!finished_ || error_ || !checksum_) return std::nullopt;
  return checksum_->algorithm();
}

std::error_code ChunkedDecoder::Feed(std::string_view received,
                                     std::string* data) {
  if (!error_ && finished_ && !received.empty()) error_ = Errc::kBadChunk;
  const std::size_t before = data->size();
  while (!error_ && !received.empty()) error_ = Step(&received, data);
  if (error_) data->resize(before);
  return error_;
}

std::error_code ChunkedDecoder::Finish() {
  if (error_ || finished_) return error_;
  finished_ = true;
  switch (state_) {
    case State::kDone:
      if (!checksum_) return {};
      [[fallthrough]];
    case State::kBlankLine:
      return error_ = TrailerVerdict();
    case State::kTrailer:
      // AWS's layout (a blank line first) may end without a closing one.
      if (leading_blank_ && line_.empty()) return error_ = TrailerVerdict();
      [[fallthrough]];
    default:
      return error_ = Errc::kIncompleteBody;
  }
}

// Consumes some of `*in`: the state's bytes, up to its next decision.
std::error_code ChunkedDecoder::Step(std::string_view* in, std::string* data) {
  bool complete = false;
  switch (state_) {
    case State::kSizeLine:
      if (auto ec = TakeLine(in, &complete)) return ec;
      return complete ? SizeLine() : std::error_code();
    case State::kData:
      return TakeData(in, data);
    case State::kDataCr:
      return TakeByte(in, '\r', State::kDataLf);
    case State::kDataLf:
      return TakeByte(in, '\n', State::kSizeLine);
    case State::kEndCr:
      return TakeByte(in, '\r', State::kEndLf);
    case State::kEndLf:
      return TakeByte(in, '\n', State::kDone);
    case State::kBlankLine:
      // More follows the empty line: it opened the trailer, as in AWS's
      // documented example.
      leading_blank_ = true;
      state_ = State::kTrailer;
      return {};
    case State::kTrailer:
      if (auto ec = TakeLine(in, &complete)) return ec;
      return complete ? TrailerLine() : std::error_code();
    case State::kDone:
      return Errc::kBadChunk;
  }
  return Errc::kBadChunk;
}

// A line ends at its first CRLF; a lone CR or LF is part of it (and then
// refused by what reads it).
std::error_code ChunkedDecoder::TakeLine(std::string_view* in, bool* complete) {
  while (!in->empty()) {
    std::string_view room = in->substr(0, kLineWindow - line_.size());
    std::size_t lf = room.find('\n');
    std::size_t n = lf == std::string_view::npos ? room.size() : lf + 1;
    line_.append(room.substr(0, n));
    in->remove_prefix(n);
    if (line_.ends_with(kCrlf)) {
      line_.resize(line_.size() - kCrlf.size());
      *complete = true;
      return {};
    }
    if (line_.size() == kLineWindow) return Errc::kBadChunk;
  }
  return {};
}

std::error_code ChunkedDecoder::TakeByte(std::string_view* in, char byte,
                                         State next) {
  if (in->front() != byte) return Errc::kBadChunk;
  in->remove_prefix(1);
  state_ = next;
  return {};
}

std::error_code ChunkedDecoder::SizeLine() {
  std::uint64_t size = 0;
  std::string_view signature;
  if (auto ec = ChunkLine(line_, signer_.has_value(), &size, &signature)) {
    return ec;
  }
  const std::optional<std::uint64_t>& declared = check_.decoded_length;
  if (declared && size > *declared - total_) return Errc::kLengthMismatch;
  signature_ = signature.size() == kSignatureSize ? signature : "";
  line_.clear();
  remaining_ = size;
  final_chunk_ = size == 0;
  state_ = State::kData;
  return final_chunk_ ? EndOfData() : std::error_code();
}

std::error_code ChunkedDecoder::TakeData(std::string_view* in,
                                         std::string* data) {
  std::string_view piece =
      in->substr(0, std::min<std::uint64_t>(remaining_, in->size()));
  in->remove_prefix(piece.size());
  data->append(piece);
  if (signer_) chunk_hash_.Update(piece);
  if (checksum_) checksum_->Update(piece);
  remaining_ -= piece.size();
  total_ += piece.size();
  return remaining_ == 0 ? EndOfData() : std::error_code();
}

// Every chunk's signature is checked, the final empty one's included: a
// body cut after any chunk is not a body the client signed.
std::error_code ChunkedDecoder::EndOfData() {
  if (signer_) {
    last_signature_ = signer_->NextOfHash(chunk_hash_.HexDigest());
    if (!ConstantTimeEqual(last_signature_, signature_)) {
      return Errc::kChunkSignatureMismatch;
    }
    signature_.clear();
  }
  if (!final_chunk_) {
    state_ = State::kDataCr;
    return {};
  }
  const std::optional<std::uint64_t>& declared = check_.decoded_length;
  if (declared && total_ != *declared) return Errc::kLengthMismatch;
  if (!checksum_) {
    state_ = State::kEndCr;
    return {};
  }
  checksum_value_ = checksum_->Base64Digest();
  state_ = State::kTrailer;
  return {};
}

// A trailer line is judged when it arrives (its verdict kept for Finish,
// which reports the signature before the checksum).
std::error_code ChunkedDecoder::TrailerLine() {
  std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) {
    bool first = !leading_blank_ && !trailer_lines_;
    state_ = first ? State::kBlankLine : State::kDone;
    return {};
  }
  trailer_lines_ = true;
  std::size_t colon = line.find(':');
  if (colon == 0 || colon == std::string::npos || trailer_signature_ok_) {
    return Errc::kBadTrailer;
  }
  std::string field = Lower(std::string_view(line).substr(0, colon));
  std::string_view value = TrimSpaces(std::string_view(line).substr(colon + 1));
  std::string_view name = ChecksumHeaderName(checksum_->algorithm());
  auto expected = [&](std::string_view canonical) {
    return Signature(check_.signing_key,
                     TrailerStringToSign(check_.amz_date, check_.scope,
                                         last_signature_, canonical));
  };
  if (signer_ && field == kTrailerSignature) {
    if (expected_trailer_signature_.empty()) {
      expected_trailer_signature_ = expected("");
    }
    trailer_signature_ok_ =
        ConstantTimeEqual(expected_trailer_signature_, value);
  } else if (field == name && !checksum_ok_) {
    checksum_ok_ = value == checksum_value_;
    if (signer_) {
      expected_trailer_signature_ =
          expected(std::string(name).append(":").append(value).append("\n"));
    }
  } else {
    return Errc::kBadTrailer;
  }
  return {};
}

std::error_code ChunkedDecoder::TrailerVerdict() {
  if (signer_ && !trailer_signature_ok_.value_or(false)) {
    return Errc::kChunkSignatureMismatch;
  }
  if (!checksum_ok_) return Errc::kMissingChecksum;
  if (!*checksum_ok_) return Errc::kChecksumMismatch;
  return {};
}

}  // namespace fencepost::sigv4
