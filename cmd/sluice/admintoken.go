package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// adminToken reads the admin token from file, else from SLUICE_ADMIN_TOKEN,
// and refuses a weak one. A file keeps the secret out of the process list and
// the shell history.
func adminToken(file string) (string, error) {
	if file == "" {
		token := os.Getenv("SLUICE_ADMIN_TOKEN")
		if err := httpapi.CheckAdminToken(token); token != "" && err != nil {
			return "", fmt.Errorf("SLUICE_ADMIN_TOKEN: %w", err)
		}
		return token, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--admin-token-file %s is empty", file)
	}
	if err := httpapi.CheckAdminToken(token); err != nil {
		return "", fmt.Errorf("--admin-token-file %s: %w", file, err)
	}
	return token, nil
}
