package main

import (
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/logging"
)

func TestLogRetention(t *testing.T) {
	cases := []struct {
		env     map[string]string
		want    logging.Retention
		wantErr string
	}{
		{nil, logging.Retention{}, ""},
		{map[string]string{"HAPPY_LOG_KEEP_DAYS": "3", "HAPPY_LOG_KEEP_FILES": "20"}, logging.Retention{MaxAge: 72 * time.Hour, MaxFiles: 20}, ""},
		{map[string]string{"HAPPY_LOG_KEEP_DAYS": "-1"}, logging.Retention{MaxAge: -24 * time.Hour}, ""},
		{map[string]string{"HAPPY_LOG_KEEP_DAYS": "week", "HAPPY_LOG_KEEP_FILES": "-5"}, logging.Retention{},
			"HAPPY_LOG_KEEP_DAYS=\"week\": want a whole number of at least -1\nHAPPY_LOG_KEEP_FILES=\"-5\": want a whole number of at least -1"},
	}
	for _, tc := range cases {
		got, err := logRetention(func(k string) string { return tc.env[k] })
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tc.want || gotErr != tc.wantErr {
			t.Errorf("logRetention(%v) = %+v, %q; want %+v, %q", tc.env, got, gotErr, tc.want, tc.wantErr)
		}
	}
}
