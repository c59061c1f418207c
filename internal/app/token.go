package app

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/signoff-dev/signoff/config"
)

func (c *cli) tokenCmd() *cobra.Command {
	tok := &cobra.Command{Use: "token", Short: "Make tokens for the agent API (/v1)"}
	var id, requester, scopes string
	newCmd := &cobra.Command{
		Use:   "new --id ID --requester REQ --scopes submit,read",
		Short: "Make a token: prints it once, then the config lines with its SHA-256",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, requester = strings.TrimSpace(id), strings.TrimSpace(requester)
			if id == "" || requester == "" {
				return usageError{"--id and --requester are required"}
			}
			if strings.ContainsFunc(id+requester, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return usageError{"--id and --requester must be one line without control characters"}
			}
			var list []string
			for _, s := range strings.Split(scopes, ",") {
				s = strings.TrimSpace(s)
				if !slices.Contains(config.Scopes, s) {
					return usageError{fmt.Sprintf("unknown scope %q (scopes: %s)", s, strings.Join(config.Scopes, ", "))}
				}
				if !slices.Contains(list, s) {
					list = append(list, s)
				}
			}
			secret, sum, err := newToken()
			if err != nil {
				return err
			}
			// JSON strings are YAML strings: whatever the id holds, the
			// lines paste as what was typed.
			q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
			fmt.Fprintln(c.out, secret)
			fmt.Fprintf(c.out, "# The token above is shown once: signoff keeps only its SHA-256.\n# Paste under api.tokens in the config:\n")
			fmt.Fprintf(c.out, "  - id: %s\n    sha256: %s\n    requester: %s\n    scopes: [%s]\n", q(id), sum, q(requester), strings.Join(list, ", "))
			return nil
		},
	}
	newCmd.Flags().StringVar(&id, "id", "", "a name for the token, shown in logs (required)")
	newCmd.Flags().StringVar(&requester, "requester", "", "the requester id every proposal made with the token speaks for (required)")
	newCmd.Flags().StringVar(&scopes, "scopes", "submit,read", "what the token may do: "+strings.Join(config.Scopes, ", "))
	tok.AddCommand(newCmd)
	return tok
}

// newToken makes a secret (sk_ and 32 random bytes, base64url) and the hex
// SHA-256 the config holds instead.
func newToken() (secret, sum string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("make token: %w", err)
	}
	secret = "sk_" + base64.RawURLEncoding.EncodeToString(b)
	h := sha256.Sum256([]byte(secret))
	return secret, hex.EncodeToString(h[:]), nil
}
