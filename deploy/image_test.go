package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// finalStage returns the instructions of a Containerfile's last stage, with
// each COPY reduced to its destination: the root Dockerfile copies from its
// build stage, deploy/image/Containerfile from a prepared context, and the
// images they make must otherwise be the same.
func finalStage(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var stage []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			stage = []string{line}
			continue
		case "COPY":
			line = "COPY " + fields[len(fields)-1]
		}
		stage = append(stage, line)
	}
	return stage
}

func TestImageDefinitionsAgree(t *testing.T) {
	docker := finalStage(t, filepath.Join(repoRoot, "Dockerfile"))
	buildah := finalStage(t, filepath.Join("image", "Containerfile"))
	if !slices.Equal(docker, buildah) {
		t.Fatalf("the Dockerfile's final stage and deploy/image/Containerfile differ:\n%s\n---\n%s",
			strings.Join(docker, "\n"), strings.Join(buildah, "\n"))
	}
	for _, want := range []string{"FROM scratch", "USER 65532:65532", `ENTRYPOINT ["sluice"]`, "EXPOSE 8080 8081 8082",
		"COPY /etc/ssl/certs/ca-certificates.crt", "COPY /usr/local/bin/sluice"} {
		if !slices.Contains(docker, want) {
			t.Errorf("the image lacks %q", want)
		}
	}
}
