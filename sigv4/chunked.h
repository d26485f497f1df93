#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "sigv4/checksum.h"
#include "sigv4/crypto.h"
#include "sigv4/secret.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {

// Decoding a received `Content-Encoding: aws-chunked` body, checking every
// signature and checksum it carries ("Signature Calculations for the
// Authorization Header: Transferring Payload in Multiple Chunks" and
// "... Including Trailing Headers" in S3's API reference), either as the
// body arrives (ChunkedDecoder) or whole (DecodeAwsChunked, the same
// decoder fed once). Pure: bytes in, decoded bytes out; the caller has
// verified the request's own signature (verifier.h) first.

inline constexpr std::string_view kStreamingPayloadTrailer =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedTrailer =
    "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
inline constexpr std::string_view kTrailerAlgorithm =
    "AWS4-HMAC-SHA256-TRAILER";

// The three forms S3 clients send, by their x-amz-content-sha256.
enum class PayloadKind {
  // STREAMING-AWS4-HMAC-SHA256-PAYLOAD: "<hex size>;chunk-signature=<sig>
  // \r\n<data>\r\n" per chunk, each signature chained to the one before
  // from the request's own, up to and including the final empty chunk's.
  kSigned,
  // STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: as kSigned, then the trailer:
  // "x-amz-checksum-<alg>:<base64>\r\n", "x-amz-trailer-signature:<sig>\r\n"
  // and "\r\n". The trailer's string to sign is "AWS4-HMAC-SHA256-TRAILER\n
  // <amz date>\n<scope>\n<final chunk's signature>\n<hex SHA-256 of the
  // trailer's other lines, each "name:value\n", names lower-case, sorted>".
  kSignedTrailer,
  // STREAMING-UNSIGNED-PAYLOAD-TRAILER (boto3 >= 1.36 and recent AWS CLIs):
  // "<hex size>\r\n<data>\r\n" per chunk, "0\r\n", then the checksum
  // trailer and "\r\n". No signature: the checksum is what protects the data.
  kUnsignedTrailer,
};

// The kind an x-amz-content-sha256 value names; nullopt for any other value
// (a hex hash, UNSIGNED-PAYLOAD, the SigV4a STREAMING-AWS4-ECDSA-P256-...
// forms, which are not supported).
std::optional<PayloadKind> StreamingPayloadKind(
    std::string_view content_sha256);

// What the decoder needs from the request's headers and verified claim.
struct ChunkedCheck {
  PayloadKind kind = PayloadKind::kSigned;
  // The signed kinds only: SigningKey(secret, claim.scope), the claim's amz
  // date and scope, and the request's own signature, already verified (the
  // seed of the chain).
  Secret signing_key;
  std::string amz_date;
  Scope scope;
  std::string seed_signature;
  // The trailer kinds only: x-amz-trailer as received. It must name exactly
  // one x-amz-checksum-<alg> (crc32, crc32c, crc64nvme, sha1, sha256).
  std::string trailer_header;
  // x-amz-decoded-content-length; nullopt when the request has none (a
  // client streaming a body of unknown length), then any length decodes.
  std::optional<std::uint64_t> decoded_length;
};

// What a body decodes to.
struct ChunkedBody {
  std::string data;
  // The trailer kinds: the trailing checksum, verified against `data`.
  std::optional<ChecksumAlgorithm> checksum_algorithm;
  std::string checksum;  // its base64 value
};

// The longest size line or trailer line accepted, CRLF excluded.
inline constexpr std::size_t kMaxChunkLine = 4096;

// Decodes one aws-chunked body as `check` describes while it arrives, in
// any split (one byte at a time included), with the grammar and errors of
// DecodeAwsChunked below; each error is returned as soon as the bytes
// received decide it:
//   - a size line or trailer line when its CRLF arrives (or when
//     kMaxChunkLine bytes pass without one): kBadChunk, kLengthMismatch (a
//     chunk past decoded_length), a missing or malformed chunk-signature,
//     kBadTrailer;
//   - a chunk's signature when its last data byte arrives, before any byte
//     after it is taken;
//   - a CRLF refused, or a byte after the end, at that byte;
//   - at Finish: kIncompleteBody, and the trailer's signature and checksum.
// Chunk data is handed out as it arrives, before its chunk's signature is
// checked: the caller must not let the body's last byte take effect before
// Finish succeeds. Memory: buffered() bytes of the body at most, whatever
// the chunks' sizes. Not thread-safe.
class ChunkedDecoder {
 public:
  // Refuses x-amz-trailer at once (kMissingChecksum, kUnsupportedChecksum,
  // kChecksumConflict), as error() then says.
  explicit ChunkedDecoder(ChunkedCheck check);
  ChunkedDecoder(const ChunkedDecoder&) = delete;
  ChunkedDecoder& operator=(const ChunkedDecoder&) = delete;

  // The first error met so far; every later call returns it again.
  std::error_code error() const { return error_; }

  // Takes the next bytes of the body and appends the chunk data among them
  // to `*data`. On error nothing is appended. After Finish: kBadChunk.
  std::error_code Feed(std::string_view received, std::string* data);

  // At the end of the received body: success when it was a whole body whose
  // every signature and checksum matched. Call once, after the last Feed.
  std::error_code Finish();

  // Bytes of the body held back (an unfinished line, a chunk's claimed
  // signature): at most kMaxChunkLine + 2.
  std::size_t buffered() const { return line_.size() + signature_.size(); }

  // After Finish succeeded, for the trailer kinds: the trailing checksum
  // (verified), as ChunkedBody holds it.
  std::optional<ChecksumAlgorithm> checksum_algorithm() const;
  const std::string& checksum() const { return checksum_value_; }

 private:
  enum class State {
    kSizeLine,  // a chunk's size line
    kData,      // remaining_ bytes of a chunk's data
    kDataCr,    // the CRLF after them
    kDataLf,
    kEndCr,  // kSigned: the CRLF after the final chunk
    kEndLf,
    kTrailer,    // the trailer kinds: a trailer line
    kBlankLine,  // the first trailer line was empty: the end, or AWS's layout
    kDone,       // nothing may follow
  };

  std::error_code Step(std::string_view* in, std::string* data);
  std::error_code TakeLine(std::string_view* in, bool* complete);
  std::error_code TakeByte(std::string_view* in, char byte, State next);
  std::error_code SizeLine();
  std::error_code TakeData(std::string_view* in, std::string* data);
  std::error_code EndOfData();
  std::error_code TrailerLine();
  std::error_code TrailerVerdict();

  ChunkedCheck check_;
  std::optional<ChunkSigner> signer_;  // the signed kinds
  std::optional<Checksum> checksum_;   // the trailer kinds
  Sha256 chunk_hash_;                  // of the current chunk's data
  State state_ = State::kSizeLine;
  std::error_code error_;
  bool finished_ = false;
  std::string line_;       // the line being received, CRLF included
  std::string signature_;  // the current chunk's claimed signature
  std::uint64_t remaining_ = 0;
  std::uint64_t total_ = 0;
  bool final_chunk_ = false;
  std::string last_signature_;  // the chain's, for the trailer's
  // The trailer, judged line by line so that no value is held.
  bool leading_blank_ = false;
  bool trailer_lines_ = false;
  std::string expected_trailer_signature_;
  std::optional<bool> trailer_signature_ok_;  // set when the line came
  std::optional<bool> checksum_ok_;           // likewise
  std::string checksum_value_;                // the data's
};

// Decodes `body` as `check` describes. Chunk sizes are 1 to 16 hex digits
// (either case); the first empty chunk is the last; a trailer line is
// "name:value", surrounding blanks of the value ignored; one empty line
// between the final chunk and the trailer (the layout of AWS's documented
// example) is tolerated, in which case the closing empty line may be absent.
// Nothing may follow the end. On error `*out` is unspecified. Errors:
//   kBadChunk                a size line or CRLF refused, a line longer than
//                            kMaxChunkLine, bytes after the end
//   kIncompleteBody          the body ends before its end
//   kLengthMismatch          the chunks do not add up to decoded_length
//   kChunkSignatureMismatch  a chunk-signature (the final one's included)
//                            or the x-amz-trailer-signature absent or wrong
//   kBadTrailer              a trailer line malformed, repeated, not the one
//                            x-amz-trailer announces, or after the signature
//   kMissingChecksum         no checksum announced, or the trailer lacks it
//   kUnsupportedChecksum     x-amz-trailer names another header
//   kChecksumConflict        x-amz-trailer names two
//   kChecksumMismatch        the trailing checksum is not the data's
// Signatures are checked before the checksum, chunk by chunk as they come.
std::error_code DecodeAwsChunked(std::string_view body,
                                 const ChunkedCheck& check, ChunkedBody* out);

// The string to sign of an x-amz-trailer-signature, for `canonical_trailer`
// ("x-amz-checksum-crc32c:sOO8/Q==\n"), chained to the final chunk's
// signature.
std::string TrailerStringToSign(std::string_view amz_date, const Scope& scope,
                                std::string_view previous_signature,
                                std::string_view canonical_trailer);

}  // namespace fencepost::sigv4
