// A test program run as a real child process, driven through its stdin and
// stdout: read its "ready ..." line, send it a line to start, close stdin
// to let it exit. The child is killed and reaped if the test ends first.
#ifndef LOUPE_TESTS_SUPPORT_CHILD_PROCESS_H_
#define LOUPE_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace loupe::testing {

class ChildProcess {
 public:
  // kMerged: its stderr comes through the same pipe as its stdout, for a
  // child that says on stderr when it is ready (tracectl attach).
  enum class Stderr { kInherited, kMerged };
  explicit ChildProcess(const std::vector<std::string>& argv, Stderr stderr_to = Stderr::kInherited);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of its stdout, without the newline; "" at end of output.
  std::string ReadLine();
  // Everything it writes from here until it closes its stdout.
  std::string ReadAll();
  // The words of the next line: ReadWords()[0] is the first word.
  std::vector<std::string> ReadWords();
  void WriteLine(const std::string& line);
  void CloseStdin();
  // Waits for it to exit; returns its exit status (or -1).
  int Wait();

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::string buffered_;
};

// Path of a test program built next to the tests (tests/testprogs).
std::string TestProgram(const std::string& name);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_CHILD_PROCESS_H_
