// One direction of a TLS relay's copy (tls_relay.h): a fixed-size buffer, filled at its tail
// by one side and emptied from its head by the other. Its size is the relay's backpressure:
// while it is full, the side that fills it is not read.
#ifndef SLUICE_GRPC_RELAY_BUFFER_H_
#define SLUICE_GRPC_RELAY_BUFFER_H_

#include <cstddef>
#include <cstring>
#include <vector>

namespace sluice::server {

class RelayBuffer {
 public:
  // Empty and without room until then: a connection still in its handshake holds no buffer.
  void Allocate(size_t bytes) { data_.resize(bytes); }

  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  const char* head() const { return data_.data() + begin_; }
  void Consume(size_t n) { begin_ += n; }
  void Clear() { begin_ = end_ = 0; }

  // Room at the tail, moving what is left to the front when the tail is reached (an OpenSSL
  // write in progress allows that: SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
  size_t room() {
    if (begin_ == end_) {
      begin_ = end_ = 0;
    } else if (end_ == data_.size() && begin_ > 0) {
      std::memmove(data_.data(), data_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return data_.size() - end_;
  }
  char* tail() { return data_.data() + end_; }
  void Commit(size_t n) { end_ += n; }

 private:
  std::vector<char> data_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace sluice::server

#endif  // SLUICE_GRPC_RELAY_BUFFER_H_
