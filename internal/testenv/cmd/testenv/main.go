// Command testenv starts servers of the shared test set (internal/testenv)
// on free loopback ports under a temporary directory, and then either runs
// a command with the PAYSERVER_TEST_* variables that describe them, or
// prints those variables as `export` lines and keeps the servers up until
// it gets SIGINT or SIGTERM. The servers stop when it exits.
//
//	go run ./internal/testenv/cmd/testenv [-services LIST] [-- COMMAND ARGS...]
//
// LIST is comma-separated: redis, cluster, mariadb, mariadb-durable, nacos,
// nacos-cluster (default redis,cluster,mariadb,nacos). With a command, testenv exits with
// the command's status.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"payserver/internal/testenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run starts the servers and runs the command, or waits for a signal; it
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testenv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	services := fs.String("services", "redis,cluster,mariadb,nacos", "servers to start: redis, cluster, mariadb, mariadb-durable, nacos, nacos-cluster")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts, err := parseServices(*services)
	if err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 2
	}
	sess, err := testenv.NewSession("payserver-testenv")
	if err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 1
	}
	defer sess.Close()
	// Signals end the command (which gets them too, from the terminal or
	// from us) or the wait; the servers stop at sess.Close.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	set := testenv.StartSet(sess, opts)
	env := set.Env()
	if fs.NArg() == 0 {
		for _, kv := range env {
			name, value, _ := strings.Cut(kv, "=")
			fmt.Fprintf(stdout, "export %s='%s'\n", name, value)
		}
		fmt.Fprintln(stderr, "testenv: servers up; SIGINT or SIGTERM stops them")
		<-sigs
		return 0
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testenv:", err)
		return 1
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintln(stderr, "testenv:", err)
		return 1
	}
}

// parseServices turns a comma-separated list into SetOptions.
func parseServices(list string) (testenv.SetOptions, error) {
	var o testenv.SetOptions
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "redis":
			o.Redis = true
		case "cluster":
			o.Cluster = true
		case "mariadb":
			o.MariaDB = true
		case "mariadb-durable":
			o.MariaDBDurable = true
		case "nacos":
			o.Nacos = true
		case "nacos-cluster":
			o.NacosCluster = true
		default:
			return o, fmt.Errorf("unknown service %q (redis, cluster, mariadb, mariadb-durable, nacos, nacos-cluster)", name)
		}
	}
	return o, nil
}
