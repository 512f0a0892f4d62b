#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <utility>

namespace loupe::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, Stderr stderr_to) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    if (stderr_to == Stderr::kMerged) dup2(out[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  stdin_ = in[1];
  stdout_ = out[0];
}

ChildProcess::~ChildProcess() {
  CloseStdin();
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (stdout_ >= 0) close(stdout_);
}

std::string ChildProcess::ReadLine() {
  while (true) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    char chunk[256];
    const ssize_t n = read(stdout_, chunk, sizeof chunk);
    if (n <= 0) return std::exchange(buffered_, {});
    buffered_.append(chunk, static_cast<size_t>(n));
  }
}

std::string ChildProcess::ReadAll() {
  char chunk[65536];
  for (ssize_t n; (n = read(stdout_, chunk, sizeof chunk)) > 0;) {
    buffered_.append(chunk, static_cast<size_t>(n));
  }
  return std::exchange(buffered_, {});
}

std::vector<std::string> ChildProcess::ReadWords() {
  std::istringstream in(ReadLine());
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

void ChildProcess::WriteLine(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] ssize_t ignored = write(stdin_, text.data(), text.size());
}

void ChildProcess::CloseStdin() {
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

int ChildProcess::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (waitpid(pid_, &status, 0) != pid_) return -1;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string TestProgram(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/'));  // .../build/tests/<tier>
  return dir.substr(0, dir.rfind('/')) + "/testprogs/" + name;
}

}  // namespace loupe::testing
