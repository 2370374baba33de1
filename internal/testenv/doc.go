// Package testenv starts the real servers the tests and benchmarks run
// against: a standalone Redis, a Redis Cluster, Redis Sentinel, MariaDB
// (plain, TLS or durable) and r-nacos (one node or a three-node raft group).
//
// Every server listens on free loopback ports, keeps its data, logs and
// configuration under the caller's TempDir, counts as started only once a
// real request answers (PING, SELECT 1, a Nacos publish read back), and is
// killed by the caller's Cleanup. Its process runs in a process group of its
// own and, on Linux, dies with the process that started it, so a crashed
// test run leaves no servers behind. Handles have Kill (SIGKILL), Stop
// (SIGTERM), Start (again, on the same ports and data) and Pause/Resume
// (SIGSTOP/SIGCONT) for fault tests.
//
// A server whose binary is not installed (scripts/install-services.sh
// installs them) skips the test, except with CI=true, where it fails; a
// server that does not start always fails.
//
// Outside a test (TestMain, the testenv command) a Session stands in for
// testing.TB, and StartSet starts the shared set of servers and returns the
// PAYSERVER_TEST_* variables that describe it.
package testenv
