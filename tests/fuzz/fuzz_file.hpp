#pragma once
// The fuzz input as a file (the readers map files): an anonymous memory file, named by its
// /proc/self/fd path, gone when closed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

struct FuzzFile {
  int fd = -1;
  std::string path;
  FuzzFile(const uint8_t* data, size_t size) {
    fd = memfd_create("fuzz", 0);
    size_t at = 0;
    while (fd >= 0 && at < size) {
      const ssize_t n = write(fd, data + at, size - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  ~FuzzFile() {
    if (fd >= 0) close(fd);
  }
};
