#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

// S3's multipart uploads as the front door relays them: the result
// documents a store answers read, and the upload ids the door hands out.
// Pure functions over strings.
namespace fencepost::s3 {

// Whether `document`'s root element is <Error>: CompleteMultipartUpload
// and CopyObject may answer 200 and then fail in the body.
bool IsErrorDocument(std::string_view document);

// The decoded text of the first child named `name` of `document`'s root
// element (<UploadId> of InitiateMultipartUploadResult, say); nullopt when
// there is none or the document is malformed.
std::optional<std::string> ResultField(std::string_view document,
                                       std::string_view name);

// The <ETag> of a result document, unquoted; "" when it has none.
std::string EtagInResult(std::string_view document);

// `document` with the text of every element named `name` (at any depth)
// replaced by what `rewrite` makes of its decoded text (escaped again), or
// nullopt when the document is malformed or `rewrite` returns nullopt for
// one of them. For the store's ListParts and ListMultipartUploads answers:
// the store's keys and upload ids as the door's client knows them.
std::optional<std::string> RewriteElements(
    std::string_view document, std::string_view name,
    const std::function<std::optional<std::string>(std::string_view)>& rewrite);

// `document` without its elements named `name` (at any depth, with what
// they hold): the store's <Owner> and <Initiator> in a relayed listing,
// which name the store's own account.
std::string RemoveElements(std::string_view document, std::string_view name);

// An upload id the front door hands out for the store's `store_id`: the
// token the upload was started with travels in it, with a MAC (keyed by
// `mac_key`, a key derived from the store's secret, and bound to the
// object key) so that a client cannot change it: "fp1.TOKEN.MAC.STORE_ID".
// Kept by the client, it survives a restart of fencepost and is good on
// every replica that shares the store's credentials.
std::string MakeUploadId(std::string_view mac_key, std::string_view object,
                         std::uint64_t token, std::string_view store_id);

// What an upload id the door receives stands for: the store's id, and the
// token when it is one of MakeUploadId's for `object` whose MAC holds.
// Another id (a store's own, as its listing shows them) has no token.
// nullopt for an id of the door's form whose MAC or token is wrong.
struct UploadId {
  std::string store_id;
  std::optional<std::uint64_t> token;
};
std::optional<UploadId> ReadUploadId(std::string_view mac_key,
                                     std::string_view object,
                                     std::string_view id);

}  // namespace fencepost::s3
