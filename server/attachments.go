package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/happy-dev/happy/server/store"
)

// Attachments are opaque encrypted blobs kept by the store (the SQLite
// store as files under <DataDir>/attachments/sessions/<sid>/attachments/<file>,
// PostgreSQL in the database), addressed by the ref
// "sessions/<sid>/attachments/<file>" as in the reference relay's local
// storage mode. They are deleted with their session.

func validAttachmentFile(name string) bool { return store.ValidAttachmentName(name) }

func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimSuffix(s.cfg.PublicURL, "/")
	}
	return s.scheme(r) + "://" + r.Host
}

// postRequestUpload: POST …/attachments/request-upload {filename, size} →
// {ref, uploadUrl, method:"PUT"}; size over the limit is 413.
func (s *Server) postRequestUpload(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		Filename *string  `json:"filename"`
		Size     *float64 `json:"size"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.Filename == nil || req.Size == nil || *req.Size < 0 {
		writeErr(w, http.StatusBadRequest, "filename (string) and size (non-negative number) are required")
		return
	}
	sid := r.PathValue("id")
	if _, err := s.st.Session(r.Context(), acct, sid); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	if int64(*req.Size) > s.cfg.MaxAttachmentBytes {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("File too large (max %d bytes)", s.cfg.MaxAttachmentBytes))
		return
	}
	file := uuid.NewString() + ".enc"
	writeJSON(w, http.StatusOK, map[string]any{
		"ref":       "sessions/" + sid + "/attachments/" + file,
		"uploadUrl": s.baseURL(r) + "/v1/sessions/" + sid + "/attachments/" + file,
		"method":    "PUT",
	})
}

// putAttachment: PUT …/attachments/:file with the raw bytes → {ok:true}.
func (s *Server) putAttachment(w http.ResponseWriter, r *http.Request, acct string) {
	sid, file := r.PathValue("id"), r.PathValue("file")
	if _, err := s.st.Session(r.Context(), acct, sid); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	if !validAttachmentFile(file) {
		writeErr(w, http.StatusNotFound, "Invalid attachment file")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxAttachmentBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("File too large (max %d bytes)", s.cfg.MaxAttachmentBytes))
			return
		}
		if he := slowBodyAnswer(err); he != nil {
			writeErr(w, he.status, he.msg)
			return
		}
		writeErr(w, http.StatusBadRequest, "Cannot read request body: "+err.Error())
		return
	}
	if err := s.st.PutAttachment(r.Context(), acct, sid, file, body, s.nowMs()); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// postRequestDownload: POST …/attachments/request-download {ref} → {downloadUrl}.
func (s *Server) postRequestDownload(w http.ResponseWriter, r *http.Request, acct string) {
	var req struct {
		Ref *string `json:"ref"`
	}
	if err := readJSON(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if req.Ref == nil {
		writeErr(w, http.StatusBadRequest, "ref is a required string")
		return
	}
	sid := r.PathValue("id")
	if _, err := s.st.Session(r.Context(), acct, sid); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	prefix := "sessions/" + sid + "/attachments/"
	if !strings.HasPrefix(*req.Ref, prefix) {
		writeErr(w, http.StatusBadRequest, "Ref does not belong to this session")
		return
	}
	file := strings.TrimPrefix(*req.Ref, prefix)
	if !validAttachmentFile(file) {
		writeErr(w, http.StatusBadRequest, "Invalid attachment ref")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"downloadUrl": s.baseURL(r) + "/v1/sessions/" + sid + "/attachments/" + file})
}

// getAttachment: GET …/attachments/:file → the stored bytes (application/octet-stream).
func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request, acct string) {
	sid, file := r.PathValue("id"), r.PathValue("file")
	if _, err := s.st.Session(r.Context(), acct, sid); err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	if !validAttachmentFile(file) {
		writeErr(w, http.StatusNotFound, "Invalid attachment file")
		return
	}
	b, err := s.st.Attachment(r.Context(), acct, sid, file)
	if err != nil {
		s.fail(w, r, err, "Attachment not found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
