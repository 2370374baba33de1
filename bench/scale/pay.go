package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// pay prints POST /pay at 1, 2 and 3 instances: scripts/bench-e2e.sh in
// its instances mode (E2E_SCALE) alone, its other runs left out, on the
// durable MariaDB and the Redis of the testenv command (make bench-scale
// starts both; the script starts its own when run without them).
func pay(o options) error {
	fmt.Println("== 4. POST /pay at 1, 2 and 3 instances on one durable MariaDB and one Redis (scripts/bench-e2e.sh, E2E_SCALE=\"1 2 3\"; SCALE_PAY=0 skips this)")
	if _, err := os.Stat("scripts/bench-e2e.sh"); err != nil {
		return fmt.Errorf("run from the module root: %w", err)
	}
	cmd := exec.Command("scripts/bench-e2e.sh")
	cmd.Env = append(os.Environ(),
		"E2E_SCALE=1 2 3", "E2E_CONCURRENCY=", "E2E_NONDURABLE_CONCURRENCY=", "E2E_BATCHING=0",
		"E2E_DURATION="+fmt.Sprintf("%ds", int(o.payDuration/time.Second)),
		"E2E_OUT=bench/out/scale-pay.txt")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/bench-e2e.sh: %w", err)
	}
	return nil
}
