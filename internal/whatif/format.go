package whatif

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// fmtCap is the refusal of a replay over the cap.
func fmtCap(n, limit int64) string {
	return fmt.Sprintf("%d decisions to replay (from..to and the warm-up before from), more than PAYSERVER_WHATIF_MAX_DECISIONS (%d): narrow from/to, or run `payserver what-if PROPOSED.yaml --from … --to …`, which streams any number", n, limit)
}

// FidelityFloor is the fidelity below which a replay says which keys and
// minutes differ, and why.
const FidelityFloor = 0.99

// WriteText prints res for a terminal: one block per key, then the
// fidelity, and below FidelityFloor the differences.
func WriteText(w io.Writer, res Result) error {
	fmt.Fprintf(w, "what if %s had been in force from %s to %s\n\n", res.ProposedVersion, res.From.Format(time.RFC3339), res.To.Format(time.RFC3339))
	if len(res.Keys) == 0 {
		fmt.Fprintln(w, "no decisions recorded in range")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(res.Keys) > 0 {
		fmt.Fprintln(tw, "KEY\tOFFERED\tADMITTED\tREFUSED\tPROPOSED ADMITTED\tPROPOSED REFUSED\tNEWLY REFUSED\tNEWLY ADMITTED\tBUSIEST MINUTE\tTOP MERCHANTS NEWLY REFUSED")
	}
	for _, k := range res.Keys {
		busiest := "-"
		if m, ok := k.Busiest(); ok {
			busiest = fmt.Sprintf("%s (%d offered, %d → %d admitted)", m.At.Format("2006-01-02T15:04Z"), m.Offered, m.ActualAdmitted, m.ProposedAdmitted)
		}
		merchants := make([]string, 0, 3)
		for i, m := range k.Merchants {
			if i == 3 {
				break
			}
			merchants = append(merchants, fmt.Sprintf("%s %d", m.MerchantID, m.NewlyRefused))
		}
		top := strings.Join(merchants, ", ")
		if top == "" {
			top = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", k.Key, k.Offered, k.Actual.Admitted, k.Actual.Refused,
			k.Proposed.Admitted, k.Proposed.Refused, k.NewlyRefused, k.NewlyAdmitted, busiest, top)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return WriteFidelity(w, res)
}

// WriteFidelity prints res's fidelity and, below FidelityFloor, the keys
// and minutes the replay under the documents in force did not reproduce.
func WriteFidelity(w io.Writer, res Result) error {
	_, err := fmt.Fprintf(w, "\nfidelity %.4f: the documents in force, replayed, reproduce that share of %d recorded decisions (the fallback's and unavailable ones aside)\n", res.Fidelity, res.Checked)
	if err != nil || res.Fidelity >= FidelityFloor {
		return err
	}
	fmt.Fprintln(w, "below 0.99: these keys and minutes differ (recorded admitted but replayed refused / recorded refused but replayed admitted):")
	for _, d := range res.Differences {
		fmt.Fprintf(w, "  %s %s: %d / %d: %s\n", d.Key, d.Minute.Format("2006-01-02T15:04Z"), d.Admitted, d.Refused, d.Why)
	}
	return nil
}
