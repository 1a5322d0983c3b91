;;; docsession.el --- Edit files through a docsession server  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: files, tools

;;; Commentary:

;; `docsession-mode' is a minor mode that hands a file buffer to a
;; docsession server (a JSON-RPC 2.0 document server with LSP's framing,
;; see protocol/README.md in the docsession repository):
;;
;; - enabling the mode opens the visited file with `document/open';
;; - every change of the buffer is sent at once with `document/edit';
;; - `save-buffer' saves through the server with `document/save';
;; - the server's notifications update the buffer: `document/didChange'
;;   (another program changed the file, the buffer had no unsaved
;;   changes) edits the buffer, `document/didMove' renames the visited
;;   file, `document/stateChanged' updates the mode line;
;; - sync tools' conflict copies beside the file (Syncthing's
;;   `notes.sync-conflict-...md' and the like) show as DS!copies, with a
;;   message naming each copy's tool, device and date;
;;   `docsession-resolve-sync-conflict' settles one (mine, theirs or
;;   merge), `docsession-show-conflict-copy' shows one;
;; - disabling the mode, or killing the buffer, closes the document
;;   without saving (`save: "never"'): Emacs owns unsaved changes;
;; - unsaved changes that a dead server left in its journal are offered
;;   back when the file is opened: `docsession-recovery-action' says
;;   whether to ask, recover, discard or leave them pending
;;   (`docsession-recover', `docsession-discard-recovery');
;;   `docsession-recoverable' lists them all.
;;
;; One server process serves every buffer of an Emacs session.  It is
;; started on first use and stopped by `docsession-shutdown' or when
;; Emacs exits.
;;
;; Requests are synchronous (`jsonrpc-request'): each change is sent and
;; its answer awaited before Emacs goes on, so edits reach the server in
;; the order they were made, each against the version the previous one
;; produced.  Over a local pipe a round trip costs well under a
;; millisecond.  Notifications that arrive while a request is waiting
;; are queued and handled after it, so that the buffer is never edited
;; in the middle of sending an edit; when the server answers -32801
;; (another program changed the file first) the edit is rebased on the
;; server's text and sent again.
;;
;; Line breaks: the buffer must not hold carriage returns, because the
;; server counts "\r\n" and a lone "\r" as line breaks and Emacs counts
;; only "\n".  Files with CRLF (or CR) line breaks, which Emacs decodes
;; with the eol type `dos' (or `mac') so that the buffer has only "\n",
;; are supported by converting: text sent to the server gets the file's
;; line break, text received has its "\r\n" and "\r" turned into "\n".
;; A buffer holding a "\r" character (a file with mixed line breaks) is
;; refused.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'parse-time)
(require 'subr-x)
(require 'url-util)

(defgroup docsession nil
  "Edit files through a docsession server."
  :group 'files
  :prefix "docsession-")

(defcustom docsession-program "docsession"
  "The docsession server executable."
  :type 'string)

(defcustom docsession-program-args '("--stdio")
  "Arguments passed to `docsession-program'.
Add \"--state-dir\" and a directory to keep earlier versions of files
elsewhere than the server's default."
  :type '(repeat string))

(defcustom docsession-request-timeout 10
  "Seconds to wait for the answer of a request."
  :type 'number)

(defcustom docsession-recovery-action 'ask
  "What to do with unsaved changes a server that ended left for a file.
When the mode is enabled in a buffer whose file has a journal of a
server that died (or quit with hot exit) holding unsaved changes, the
server offers them back.  `ask' asks, `recover' takes them back into
the buffer, `discard' deletes them, `ignore' leaves the offer pending
\(the mode line shows DS!recover; see `docsession-recover' and
`docsession-discard-recovery').  An offer is never taken while the
buffer has changes of its own."
  :type '(choice (const :tag "Ask" ask)
                 (const :tag "Recover" recover)
                 (const :tag "Discard" discard)
                 (const :tag "Leave the offer pending" ignore)))

(defcustom docsession-events-buffer-size 2000000
  "Maximum size of the *docsession events* buffer, which logs the traffic.
0 disables the log, nil means no limit."
  :type '(choice (const :tag "No limit" nil) integer))

;;; Internal state

(defvar docsession-mode)                ; Defined by `define-minor-mode' below.

(defvar docsession--connection nil
  "The `jsonrpc-process-connection' to the server, or nil.")

(defvar docsession--buffers (make-hash-table :test #'equal)
  "Map from document handle to the buffer editing it.")

(defvar docsession--request-depth 0
  "How many synchronous requests are waiting for their answer.")

(defvar docsession--queue nil
  "Notifications received while a request was waiting, oldest first.
Each element is (METHOD . PARAMS).")

(defvar docsession--applying nil
  "Non-nil while the buffer is changed by the server, not the user.
The change hooks do not send such changes back.")

(defvar-local docsession--document nil
  "The server's handle of this buffer's document.")

(defvar-local docsession--version nil
  "The version of the document the buffer's text matches.")

(defvar-local docsession--state nil
  "The document's state flags, a list of strings such as \"inConflict\".")

(defvar-local docsession--unsaved nil
  "Non-nil when the server says the document has unsaved changes.")

(defvar-local docsession--deleted nil
  "Non-nil when the document's file was deleted on disk.")

(defvar-local docsession--eol "\n"
  "The line break the document's file uses: \"\\n\", \"\\r\\n\" or \"\\r\".")

(defvar-local docsession--out-of-sync nil
  "Why the buffer no longer matches the server's text, or nil.
`push' when an edit could not be sent (the buffer's text will be sent
whole), `pull' when a change from the server could not be applied (the
server's text will be taken).")

(defvar-local docsession--change nil
  "The change announced by `before-change-functions', not yet sent.
A list (BEG END START END-POSITION OLD-TEXT): buffer positions, the
protocol positions of BEG and END, and the text about to be replaced.")

(defvar-local docsession--recovery nil
  "The server's offer of a dead server's unsaved changes, or nil.
The `recovery' member of `document/open': a plist with :date, :edits,
:version, :fileMatchesBase and :cut.")

(defvar-local docsession--edited-elsewhere nil
  "Non-nil when another running server has unsaved changes to the file.")

(defvar-local docsession--file-conflict nil
  "Non-nil when the document is in conflict with its own file.
The file changed on disk over unsaved changes, a save found it changed,
or a recovery found it changed since.  `inConflict' in the state with
this nil means only sync tools' conflict copies wait (see
`docsession--sync-copies').")

(defvar-local docsession--sync-copies nil
  "The sync tools' conflict copies beside the file, not yet resolved.
A list of the `document/versions' entries of kind \"syncConflict\":
plists with :id, :date, :size, :tool, :device (maybe absent) and :uri.
Refreshed after a `syncConflict' or `conflictResolved' notification,
and at the open when the document opens in conflict.")

(defvar-local docsession--sync-refresh-pending nil
  "Non-nil while a refresh of `docsession--sync-copies' is scheduled.")

;; The document stays open when the major mode changes (which kills
;; local variables, for example after a move renames the file).
(dolist (var '(docsession--document docsession--version docsession--state
               docsession--unsaved docsession--deleted docsession--eol
               docsession--out-of-sync docsession--change
               docsession--recovery docsession--edited-elsewhere
               docsession--file-conflict docsession--sync-copies
               docsession--sync-refresh-pending))
  (put var 'permanent-local t))

;;; Connection

(defun docsession--connection ()
  "Return the live connection to the server, starting it if needed."
  (unless (and docsession--connection
               (jsonrpc-running-p docsession--connection))
    (setq docsession--connection (docsession--start)))
  docsession--connection)

(defun docsession--start ()
  "Start the server, initialize the session and return the connection."
  (let* ((conn
          (make-instance
           'jsonrpc-process-connection
           :name "docsession"
           :events-buffer-scrollback-size docsession-events-buffer-size
           :notification-dispatcher #'docsession--dispatch
           :on-shutdown #'docsession--on-server-exit
           :process
           (lambda ()
             (make-process
              :name "docsession"
              :command (cons docsession-program docsession-program-args)
              :connection-type 'pipe
              :coding 'utf-8-emacs-unix
              :noquery t
              ;; jsonrpc.el expects exactly this name, and renames the
              ;; buffer to " *docsession stderr*".
              :stderr (get-buffer-create "*docsession stderr*")))))
         (result
          (jsonrpc-request
           conn :initialize
           (list :processId (emacs-pid)
                 :clientInfo (list :name "Emacs" :version emacs-version)
                 :capabilities
                 (list :general (list :positionEncodings ["utf-32"])))
           :timeout docsession-request-timeout))
         (encoding (plist-get (plist-get result :capabilities)
                              :positionEncoding)))
    (unless (equal encoding "utf-32")
      (jsonrpc-shutdown conn t)
      (error "docsession: the server chose %s positions, not utf-32" encoding))
    (jsonrpc-notify conn :initialized nil)
    (add-hook 'kill-emacs-hook #'docsession-shutdown)
    conn))

(defun docsession--on-server-exit (conn)
  "Forget CONN, whose server exited, and leave the mode in its buffers."
  (when (eq conn docsession--connection)
    (setq docsession--connection nil))
  (maphash (lambda (_handle buffer)
             (when (buffer-live-p buffer)
               (with-current-buffer buffer
                 (docsession--forget)
                 (setq docsession-mode nil)
                 (force-mode-line-update))))
           docsession--buffers)
  (clrhash docsession--buffers)
  (setq docsession--queue nil))

(defun docsession-shutdown ()
  "Close every document and stop the server cleanly.
Sends `shutdown' then `exit', and waits a little for the server to exit."
  (interactive)
  (let ((conn docsession--connection))
    (when conn
      (maphash (lambda (_handle buffer)
                 (when (buffer-live-p buffer)
                   (with-current-buffer buffer (docsession-mode -1))))
               (copy-hash-table docsession--buffers))
      (when (jsonrpc-running-p conn)
        (ignore-errors (jsonrpc-request conn :shutdown nil :timeout 2))
        (ignore-errors (jsonrpc-notify conn :exit nil))
        (let ((deadline (+ (float-time) 2)))
          (while (and (jsonrpc-running-p conn) (< (float-time) deadline))
            (accept-process-output nil 0.05))))
      (setq docsession--connection nil)
      (ignore-errors (jsonrpc-shutdown conn t))
      (docsession--on-server-exit conn))))

;;; Requests and notifications

(defun docsession--call (method params)
  "Send the request METHOD with PARAMS and wait for its answer.
Return (ok RESULT) or (error CODE MESSAGE DATA).  Notifications
received meanwhile are queued; the caller drains the queue with
`docsession--drain' when the buffer is consistent again."
  (let ((conn (docsession--connection)))
    (condition-case err
        (let ((docsession--request-depth (1+ docsession--request-depth)))
          (list 'ok (jsonrpc-request conn method params
                                     :timeout docsession-request-timeout)))
      (jsonrpc-error
       (let ((info (cdr err)))
         (list 'error
               (alist-get 'jsonrpc-error-code info)
               (or (alist-get 'jsonrpc-error-message info) "failed")
               (alist-get 'jsonrpc-error-data info)))))))

(defun docsession--request (method params)
  "Send METHOD with PARAMS, drain the queue and return the result.
Signal an error if the server answers one."
  (pcase (docsession--call method params)
    (`(ok ,result) (docsession--drain) result)
    (`(error ,code ,message ,_)
     (docsession--drain)
     (error "docsession: %s failed: %s (%s)" method message code))))

(defun docsession--dispatch (_conn method params)
  "Handle the notification METHOD with PARAMS from the server.
While a request waits for its answer the notification is queued."
  (if (> docsession--request-depth 0)
      (setq docsession--queue (nconc docsession--queue
                                     (list (cons method params))))
    (docsession--handle method params)))

(defun docsession--drain ()
  "Handle the queued notifications, unless a request is still waiting."
  (when (zerop docsession--request-depth)
    (while docsession--queue
      (let ((next (pop docsession--queue)))
        (docsession--handle (car next) (cdr next))))))

(defun docsession--handle (method params)
  "Handle the notification METHOD with PARAMS now."
  (let ((buffer (gethash (plist-get params :document) docsession--buffers)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (condition-case err
            (pcase method
              ('document/stateChanged (docsession--state-changed params))
              ('document/didChange (docsession--did-change params))
              ('document/didMove (docsession--did-move params)))
          (error (message "docsession: %s: %s" method
                          (error-message-string err))))))))

;;; Positions and text

(defun docsession--position (pos)
  "Return the protocol position of the buffer position POS."
  (save-restriction
    (widen)
    (save-excursion
      (goto-char pos)
      (list :line (1- (line-number-at-pos pos t))
            :character (- pos (line-beginning-position))))))

(defun docsession--point (position)
  "Return the buffer position of the protocol POSITION, clamped."
  (save-restriction
    (widen)
    (save-excursion
      (goto-char (point-min))
      (if (> (forward-line (plist-get position :line)) 0)
          (point-max)
        (min (+ (point) (plist-get position :character))
             (line-end-position))))))

(defun docsession--outbound (text)
  "Return TEXT with the file's line breaks, to send to the server."
  (if (equal docsession--eol "\n")
      text
    (string-replace "\n" docsession--eol text)))

(defun docsession--inbound (text)
  "Return TEXT from the server with every line break made \"\\n\"."
  (string-replace "\r" "\n" (string-replace "\r\n" "\n" text)))

(defun docsession--whole-text ()
  "Return the whole text of the buffer, without properties."
  (save-restriction
    (widen)
    (buffer-substring-no-properties (point-min) (point-max))))

(defun docsession--apply-edits (edits)
  "Apply the protocol EDITS to the buffer, in order, without sending them.
Point, and markers, stay where they were relative to the text."
  (let ((docsession--applying t)
        (inhibit-read-only t))
    (save-restriction
      (widen)
      (save-excursion
        (seq-doseq (edit edits)
          (let* ((range (plist-get edit :range))
                 (beg (if range
                          (docsession--point (plist-get range :start))
                        (point-min)))
                 (end (if range
                          (docsession--point (plist-get range :end))
                        (point-max)))
                 (text (docsession--inbound (plist-get edit :text))))
            (goto-char beg)
            (delete-region beg end)
            (insert text)))))))

(defun docsession--replace-text (text)
  "Make the buffer's text TEXT (from the server), keeping point and markers."
  (let ((docsession--applying t)
        (inhibit-read-only t)
        (source (generate-new-buffer " *docsession text*" t)))
    (unwind-protect
        (save-restriction
          (widen)
          (with-current-buffer source (insert (docsession--inbound text)))
          (replace-buffer-contents source 1.0))
      (kill-buffer source))))

(defun docsession--mark-clean ()
  "Mark the buffer as matching its file on disk."
  (set-buffer-modified-p nil)
  (clear-visited-file-modtime))

;;; Notifications

(defun docsession--state-changed (params)
  "Take the state of `document/stateChanged' PARAMS."
  (let ((reason (plist-get params :reason)))
    (setq docsession--state (append (plist-get params :state) nil)
          docsession--unsaved (eq (plist-get params :hasUnsavedChanges) t))
    (cond ((equal reason "deletedOnDisk") (setq docsession--deleted t))
          ((member reason '("saved" "reloaded" "reverted" "conflictResolved"))
           (setq docsession--deleted nil)))
    ;; A conflict with the file itself, told from one with copies only.
    (cond ((not (member "inConflict" docsession--state))
           (setq docsession--file-conflict nil))
          ((member reason '("externalChange" "recovered"))
           (setq docsession--file-conflict t))
          ((member reason '("saved" "reverted" "reloaded"))
           (setq docsession--file-conflict nil)))
    (when (member reason '("syncConflict" "conflictResolved"))
      ;; Not a request from here (a process filter, or the drain of one):
      ;; the list of copies is asked for from a timer.
      (docsession--schedule-sync-refresh (current-buffer)))
    (when (and (not docsession--unsaved) (not docsession--out-of-sync)
               (buffer-modified-p))
      (docsession--mark-clean))
    (when-let ((err (plist-get params :error)))
      (message "docsession: %s" (plist-get err :message)))
    (force-mode-line-update)))

(defun docsession--did-change (params)
  "Apply the edits of `document/didChange' PARAMS to the buffer."
  (let ((version (plist-get params :version)))
    (cond
     (docsession--out-of-sync nil)
     ((/= version (1+ docsession--version))
      (docsession--lose-sync 'pull (format "missed version %d"
                                           (1+ docsession--version))))
     (t
      (docsession--apply-edits (plist-get params :edits))
      (setq docsession--version version)
      ;; The server reloads only a document without unsaved changes: the
      ;; buffer now holds the file's text.
      (docsession--mark-clean)))))

(defun docsession--did-move (params)
  "Follow the move of `document/didMove' PARAMS: rename the visited file."
  (let ((file (docsession--uri-to-file (plist-get params :uri))))
    (let ((docsession--applying t))
      (set-visited-file-name file t t))
    (message "docsession: %s moved to %s"
             (docsession--uri-to-file (plist-get params :oldUri)) file)))

;;; URIs

(defun docsession--file-to-uri (file)
  "Return the file:// URI of FILE, percent-encoded as the server does."
  (concat "file://"
          (mapconcat (lambda (byte)
                       (if (or (<= ?a byte ?z) (<= ?A byte ?Z) (<= ?0 byte ?9)
                               (memq byte '(?- ?. ?_ ?~ ?/)))
                           (string byte)
                         (format "%%%02X" byte)))
                     (encode-coding-string (expand-file-name file) 'utf-8 t)
                     "")))

(defun docsession--uri-to-file (uri)
  "Return the file name of the file:// URI."
  (let ((path (replace-regexp-in-string "\\`file://\\(localhost\\)?" "" uri)))
    (decode-coding-string (url-unhex-string path) 'utf-8)))

;;; Sending changes

(defun docsession--before-change (beg end)
  "Record the region BEG..END about to change, in protocol positions."
  (unless docsession--applying
    (setq docsession--change
          (list beg end (docsession--position beg) (docsession--position end)
                (save-restriction
                  (widen)
                  (buffer-substring-no-properties beg end))))))

(defun docsession--after-change (beg end old-length)
  "Send the change of BEG..END (which replaced OLD-LENGTH characters)."
  (unless docsession--applying
    (let ((change docsession--change))
      (setq docsession--change nil)
      (condition-case err
          (pcase change
            ((guard docsession--out-of-sync) nil)
            (`(,b ,e ,start ,stop ,old)
             (if (not (and (<= b beg) (<= (+ beg old-length) e)))
                 (docsession--lose-sync 'push "a change was not announced")
               ;; The region announced before the change may be larger than
               ;; the one changed: send the whole announced region.
               (let* ((new-end (+ e (- end beg old-length)))
                      (text (save-restriction
                              (widen)
                              (buffer-substring-no-properties b new-end))))
                 (when (string-search "\r" text)
                   (run-at-time 0 nil #'docsession--refuse-cr (current-buffer)))
                 (docsession--send-edit b start stop old text))))
            (_ (docsession--lose-sync 'push "a change was not announced")))
        (error (docsession--lose-sync 'push (error-message-string err))))
      (docsession--drain))))

(defun docsession--send-edit (beg start stop old text)
  "Send the edit that replaced OLD, at START..STOP, by TEXT, now at BEG.
On -32801 rebase it on the server's text and send it again."
  (let ((attempts 0) done)
    (while (not done)
      (pcase (docsession--call
              :document/edit
              (list :document docsession--document
                    :version docsession--version
                    :edits (vector (list :range (list :start start :end stop)
                                         :text (docsession--outbound text)))))
        (`(ok ,result)
         (setq docsession--version (plist-get result :version)
               done t))
        (`(error -32801 ,_ ,data)
         (when (> (cl-incf attempts) 3)
           (error "document/edit: the document keeps changing"))
         (pcase-setq `(,beg ,start ,stop ,old)
                     (docsession--rebase beg old text
                                         (plist-get data :version))))
        (`(error ,code ,message ,_)
         (error "document/edit failed: %s (%s)" message code))))))

(defun docsession--rebase (beg old text target)
  "Rebase the local edit at BEG (OLD replaced by TEXT) on version TARGET.
The edit is undone, the server's changes queued up to TARGET are
applied (or the server's text is read), and the edit is made again at
the place its text moved to.  Return (BEG START STOP OLD) for the edit
to send again."
  (let* ((m1 (copy-marker beg))
         (m2 (copy-marker (+ beg (length text)) t))
         (pt (copy-marker (point) (> (point) beg)))
         (docsession--applying t)
         (inhibit-read-only t))
    (save-restriction
      (widen)
      ;; Undo the local edit: the buffer is at the server's old version.
      (goto-char m1)
      (delete-region m1 m2)
      (insert old)
      ;; Take the server's changes.
      (unless (docsession--take-queued-changes target)
        (pcase (docsession--call :document/read
                                 (list :document docsession--document))
          (`(ok ,result)
           (docsession--replace-text (plist-get result :text))
           (setq docsession--version (plist-get result :version)))
          (`(error ,_ ,message ,_) (error "document/read failed: %s" message))))
      ;; Make the edit again where its region is now.
      (let ((start (docsession--position m1))
            (stop (docsession--position m2))
            (old (buffer-substring-no-properties m1 m2)))
        (goto-char m1)
        (delete-region m1 m2)
        (insert text)
        (goto-char pt)
        (prog1 (list (marker-position m1) start stop old)
          (set-marker m1 nil) (set-marker m2 nil) (set-marker pt nil))))))

(defun docsession--take-queued-changes (target)
  "Apply the queued `document/didChange' of this buffer up to version TARGET.
Return non-nil if the buffer reached TARGET."
  (let ((handle docsession--document))
    (while (and (< docsession--version target)
                (when-let ((next (cl-find-if
                                  (lambda (n)
                                    (and (eq (car n) 'document/didChange)
                                         (equal (plist-get (cdr n) :document)
                                                handle)
                                         (eql (plist-get (cdr n) :version)
                                              (1+ docsession--version))))
                                  docsession--queue)))
                  (setq docsession--queue (delq next docsession--queue))
                  (docsession--apply-edits (plist-get (cdr next) :edits))
                  (setq docsession--version (plist-get (cdr next) :version)))))
    (= docsession--version target)))

;;; Losing and regaining sync

(defun docsession--lose-sync (how why)
  "Note that the buffer and the server's text differ, HOW and WHY.
HOW is `push' or `pull' (see `docsession--out-of-sync').  A timer
brings them together again."
  (unless docsession--out-of-sync
    (setq docsession--out-of-sync how)
    (message "docsession: out of sync with the server (%s); resyncing" why)
    (force-mode-line-update)
    (run-at-time 0 nil #'docsession--resync-buffer (current-buffer))))

(defun docsession--resync-buffer (buffer)
  "Resync BUFFER with the server, reporting failures."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (when docsession--document
        (condition-case err
            (docsession-resync)
          (error (message "docsession: resync failed: %s"
                          (error-message-string err))))))))

(defun docsession-resync ()
  "Make the buffer and the server's document hold the same text.
After a failed edit the buffer's text is sent whole; after a missed
change from the server its text is taken."
  (interactive)
  (unless docsession--document (user-error "Not a docsession buffer"))
  (let ((state (docsession--request :document/state
                                    (list :document docsession--document))))
    (if (eq docsession--out-of-sync 'pull)
        (let ((read (docsession--request :document/read
                                         (list :document docsession--document))))
          (docsession--replace-text (plist-get read :text))
          (setq docsession--version (plist-get read :version))
          (unless (eq (plist-get state :hasUnsavedChanges) t)
            (docsession--mark-clean)))
      (setq docsession--version (plist-get state :version))
      (docsession--push-buffer))
    (setq docsession--out-of-sync nil)
    (force-mode-line-update)))

(defun docsession--push-buffer ()
  "Send the whole buffer as one edit replacing the document's text."
  (let ((result (docsession--request
                 :document/edit
                 (list :document docsession--document
                       :version docsession--version
                       :edits (vector (list :text (docsession--outbound
                                                   (docsession--whole-text))))))))
    (setq docsession--version (plist-get result :version))))

(defun docsession--refuse-cr (buffer)
  "Turn the mode off in BUFFER, which now holds a carriage return."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (when docsession-mode
        (docsession-mode -1)
        (message "docsession-mode turned off: the buffer holds a carriage \
return, which the server counts as a line break")))))

;;; Saving

(defun docsession--write-contents ()
  "Save the buffer through the server; for `write-contents-functions'.
The save is sent without `force' first: the server refuses it (-32017)
only when the file changed on disk since it was read or saved (sync
tools' conflict copies beside it do not stop a save).  Then, and only
then, the user is asked whether to overwrite the file."
  (when docsession--out-of-sync (docsession-resync))
  (let* ((coding buffer-file-coding-system)
         (answer (docsession--call :document/save
                                   (list :document docsession--document))))
    (when (and (eq (car answer) 'error) (eql (nth 1 answer) -32017))
      ;; The refusal's notification (externalChange) shows the conflict.
      (docsession--drain)
      (force-mode-line-update)
      (if (yes-or-no-p
           (format "%s changed on disk; overwrite it with the buffer (the \
other version is kept by the server)? "
                   (file-name-nondirectory buffer-file-name)))
          (setq answer (docsession--call :document/save
                                         (list :document docsession--document
                                               :force t)))
        (user-error "Not saved; see `docsession-resolve-conflict'")))
    (pcase answer
      (`(ok ,_)
       (docsession--drain)
       (docsession--mark-clean)
       ;; `basic-save-buffer' takes the coding system from this variable,
       ;; which the process filter has just set.
       (setq last-coding-system-used coding)
       t)
      (`(error ,code ,message ,_)
       (docsession--drain)
       (force-mode-line-update)
       (error "docsession: save failed: %s (%s)" message code)))))

;;; Conflicts

(defun docsession-resolve-conflict (resolution)
  "Resolve the document's conflict with its file by RESOLUTION.
RESOLUTION is \"mine\" (keep the buffer's text, the next save
overwrites the file), \"theirs\" (take the file's text) or \"merge\"."
  (interactive
   (list (completing-read "Resolve with: " '("mine" "theirs" "merge") nil t)))
  (unless docsession--document (user-error "Not a docsession buffer"))
  (let ((result (docsession--request
                 :document/resolveConflict
                 (list :document docsession--document
                       :resolution resolution
                       :version docsession--version))))
    (if (not (eq (plist-get result :resolved) t))
        (message "docsession: %d regions changed on both sides; resolve with \
mine or theirs" (length (plist-get result :conflicts)))
      (docsession--apply-edits (plist-get result :edits))
      (setq docsession--version (plist-get result :version))
      (unless (member "inConflict" docsession--state)
        (setq docsession--file-conflict nil))
      (unless docsession--unsaved
        (docsession--mark-clean))
      (force-mode-line-update))))

;;; Sync tools' conflict copies

(defun docsession--copy-name (copy)
  "Return the file name of the conflict COPY."
  (file-name-nondirectory (docsession--uri-to-file (plist-get copy :uri))))

(defun docsession--format-minute (date)
  "Return the ISO 8601 DATE (UTC) in local time to the minute, or DATE."
  (docsession--format-date date "%Y-%m-%d %H:%M"))

(defun docsession--describe-copy (copy)
  "Return \"TOOL (device DEVICE, DATE)\" for the conflict COPY."
  (let ((device (plist-get copy :device)))
    (format "%s (%s%s)" (plist-get copy :tool)
            (if (and (stringp device) (not (string-empty-p device)))
                (format "device %s, " device)
              "")
            (docsession--format-minute (plist-get copy :date)))))

(defun docsession--fetch-sync-copies ()
  "Ask the server for the document's unresolved conflict copies; return them."
  (seq-filter (lambda (v)
                (and (equal (plist-get v :kind) "syncConflict")
                     (not (eq (plist-get v :resolved) t))))
              (append (plist-get (docsession--request
                                  :document/versions
                                  (list :document docsession--document))
                                 :versions)
                      nil)))

(defun docsession--refresh-sync-copies ()
  "Refresh `docsession--sync-copies' and tell about the new copies."
  (let* ((old (mapcar (lambda (c) (plist-get c :id)) docsession--sync-copies))
         (copies (docsession--fetch-sync-copies))
         (new (seq-remove (lambda (c) (member (plist-get c :id) old)) copies))
         (name (file-name-nondirectory buffer-file-name)))
    (setq docsession--sync-copies copies)
    (force-mode-line-update)
    (when new
      (message "docsession: %s has %s: M-x docsession-resolve-sync-conflict"
               name
               (if (cdr new)
                   (format "%d new conflict copies, from %s" (length new)
                           (mapconcat #'docsession--describe-copy new "; "))
                 (format "a conflict copy from %s"
                         (docsession--describe-copy (car new))))))
    copies))

(defun docsession--schedule-sync-refresh (buffer)
  "Refresh the conflict copies of BUFFER from a timer, once."
  (unless docsession--sync-refresh-pending
    (setq docsession--sync-refresh-pending t)
    (run-at-time 0 nil #'docsession--run-sync-refresh buffer)))

(defun docsession--run-sync-refresh (buffer)
  "Refresh the conflict copies of BUFFER, unless a request is waiting."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (cond
       ((not docsession--document)
        (setq docsession--sync-refresh-pending nil))
       ((> docsession--request-depth 0)
        ;; A request of ours waits for its answer: try again after it.
        (run-at-time 0.05 nil #'docsession--run-sync-refresh buffer))
       (t
        (setq docsession--sync-refresh-pending nil)
        (condition-case err
            (docsession--refresh-sync-copies)
          (error (message "docsession: listing the conflict copies failed: %s"
                          (error-message-string err)))))))))

(defun docsession--read-sync-copy (prompt)
  "Return the id of a conflict copy: the only one, or the one picked with PROMPT."
  (unless docsession--document (user-error "Not a docsession buffer"))
  (let ((copies (docsession--refresh-sync-copies)))
    (cond
     ((null copies)
      (user-error "docsession: %s has no conflict copies"
                  (file-name-nondirectory buffer-file-name)))
     ((null (cdr copies)) (plist-get (car copies) :id))
     (t
      (let* ((choices
              (mapcar (lambda (c)
                        (cons (format "%s: %s" (docsession--copy-name c)
                                      (docsession--describe-copy c))
                              (plist-get c :id)))
                      copies))
             (choice (completing-read prompt choices nil t)))
        (cdr (assoc choice choices)))))))

(defun docsession--show-merge-regions (name conflicts)
  "Show the merge CONFLICTS with the copy NAME in a buffer; return it."
  (let ((file (file-name-nondirectory buffer-file-name)))
    (with-current-buffer (get-buffer-create "*docsession merge*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (format (concat "%s and its conflict copy %s changed the same "
                                "lines: nothing was changed.\nResolve with mine "
                                "or theirs, or edit the buffer and resolve "
                                "with mine.\n")
                        file name))
        (seq-doseq (c conflicts)
          (let ((start (plist-get (plist-get c :range) :start))
                (end (plist-get (plist-get c :range) :end)))
            (insert (format "\n@@ lines %d-%d @@\n"
                            (1+ (plist-get start :line))
                            (max (1+ (plist-get start :line))
                                 (plist-get end :line))))
            (dolist (side '((:mine . "<<<<<<< mine (the buffer)")
                            (:base . "||||||| base")
                            (:theirs . "======= theirs (the copy)")))
              (let ((text (docsession--inbound (plist-get c (car side)))))
                (insert (cdr side) "\n" text)
                (unless (or (string-empty-p text) (string-suffix-p "\n" text))
                  (insert "\n"))))
            (insert ">>>>>>>\n"))))
      (special-mode)
      (goto-char (point-min))
      (display-buffer (current-buffer))
      (current-buffer))))

(defun docsession-resolve-sync-conflict (id resolution)
  "Resolve the sync tool's conflict copy ID with RESOLUTION.
Interactively, the copy is picked among several (its tool, device and
date shown), then the resolution: \"mine\" keeps the buffer's text,
\"theirs\" takes the copy's, \"merge\" merges the copy into the buffer
\(against the saved version the copy descends from).  The server
removes the settled copy from disk.  A merge whose sides changed the
same lines changes nothing and shows the regions in *docsession merge*.
Return the server's answer."
  (interactive
   (let ((id (docsession--read-sync-copy "Resolve the conflict copy: ")))
     (list id (completing-read (format "Resolve %s with: "
                                       (string-remove-prefix "sync:" id))
                               '("mine" "theirs" "merge") nil t))))
  (unless docsession--document (user-error "Not a docsession buffer"))
  (when docsession--out-of-sync (docsession-resync))
  (let* ((result (docsession--request
                  :document/resolveConflict
                  (list :document docsession--document
                        :resolution resolution
                        :id id
                        :version docsession--version)))
         (name (string-remove-prefix "sync:" id)))
    (if (not (eq (plist-get result :resolved) t))
        (progn
          (docsession--show-merge-regions name (plist-get result :conflicts))
          (message "docsession: %d region%s changed on both sides; nothing changed (see *docsession merge*): resolve with mine or theirs"
                   (length (plist-get result :conflicts))
                   (if (= (length (plist-get result :conflicts)) 1) "" "s")))
      (docsession--apply-edits (plist-get result :edits))
      (setq docsession--version (plist-get result :version)
            docsession--sync-copies
            (seq-remove (lambda (c) (equal (plist-get c :id) id))
                        docsession--sync-copies))
      (if docsession--unsaved
          (set-buffer-modified-p t)
        (docsession--mark-clean))
      (force-mode-line-update)
      (message "docsession: resolved %s with %s%s" name resolution
               (if docsession--sync-copies
                   (format "; %d more conflict %s"
                           (length docsession--sync-copies)
                           (if (cdr docsession--sync-copies)
                               "copies wait" "copy waits"))
                 "")))
    result))

(defun docsession-show-conflict-copy (id &optional ediff)
  "Show the text of the sync tool's conflict copy ID in a read-only buffer.
With a prefix argument (EDIFF non-nil), compare it with the buffer by
`ediff-buffers'.  Return the copy's buffer."
  (interactive
   (list (docsession--read-sync-copy "Show the conflict copy: ")
         current-prefix-arg))
  (unless docsession--document (user-error "Not a docsession buffer"))
  (let* ((text (plist-get (docsession--request
                           :document/readVersion
                           (list :document docsession--document :id id))
                          :text))
         (name (string-remove-prefix "sync:" id))
         (original (current-buffer))
         (copy (get-buffer-create (format "*docsession copy %s*" name))))
    (with-current-buffer copy
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (docsession--inbound text))
        (goto-char (point-min)))
      (let ((mode (buffer-local-value 'major-mode original)))
        (unless (eq major-mode mode)
          (ignore-errors (delay-mode-hooks (funcall mode)))))
      (setq buffer-read-only t)
      (set-buffer-modified-p nil))
    (if ediff
        (ediff-buffers original copy)
      (display-buffer copy))
    copy))

;;; Recovery of a dead server's unsaved changes

(defun docsession--format-date (date &optional format)
  "Return the ISO 8601 DATE (UTC) of the server in local time, or DATE.
FORMAT is `format-time-string''s, to the second by default."
  (or (ignore-errors
        (format-time-string (or format "%Y-%m-%d %H:%M:%S") (parse-iso8601-time-string date)))
      date))

(defun docsession--describe-recovery (offer)
  "Return a sentence telling what the recovery OFFER holds."
  (let ((edits (plist-get offer :edits))
        (cut (plist-get offer :cut)))
    (concat
     (format "%s has unsaved changes of an earlier session (%s, %d edit%s)"
             (file-name-nondirectory buffer-file-name)
             (docsession--format-date (plist-get offer :date))
             edits (if (eql edits 1) "" "s"))
     (if (eq (plist-get offer :fileMatchesBase) t)
         ""
       "; the file changed since: recovering gives a conflict to resolve")
     (if cut
         (format "; the journal's last %d bytes were %s and are lost"
                 (plist-get cut :bytes) (plist-get cut :reason))
       ""))))

(defun docsession--offer-recovery ()
  "Act on the recovery offered at `document/open', by `docsession-recovery-action'."
  (let ((description (docsession--describe-recovery docsession--recovery)))
    (if (buffer-modified-p)
        ;; Recovering would replace the buffer's own changes (the server
        ;; refuses it): the offer waits.
        (message "docsession: %s; the buffer has changes of its own: save \
or revert them, then M-x docsession-recover, or M-x \
docsession-discard-recovery" description)
      (pcase (if (eq docsession-recovery-action 'ask)
                 ;; A prompt that cannot be answered (batch Emacs at the
                 ;; end of its input) or is quit leaves the offer pending.
                 (condition-case nil
                     (completing-read
                      (concat description
                              ".  Recover, discard, or decide later? ")
                      '("recover" "discard" "later") nil t nil nil "later")
                   ((error quit) "later"))
               docsession-recovery-action)
        ((or 'recover "recover") (docsession-recover))
        ((or 'discard "discard") (docsession-discard-recovery))
        (_ (message "docsession: %s; M-x docsession-recover takes them back, \
M-x docsession-discard-recovery deletes them" description))))))

(defun docsession-recover ()
  "Take back the unsaved changes an earlier server left for this file.
The server replaces the document's text with the journal's, with its
undo history, and the buffer takes it.  If the file changed since, the
document comes back in conflict: see `docsession-resolve-conflict'."
  (interactive)
  (unless docsession--document (user-error "Not a docsession buffer"))
  (when docsession--out-of-sync (docsession-resync))
  (pcase (docsession--call :document/recover
                           (list :document docsession--document))
    (`(ok ,result)
     (setq docsession--recovery nil)
     (condition-case nil
         (docsession--apply-edits (plist-get result :edits))
       (error
        ;; The edits did not fit the buffer: take the server's text.
        (docsession--replace-text
         (plist-get (docsession--request :document/read
                                         (list :document docsession--document))
                    :text))))
     (setq docsession--version (plist-get result :version)
           docsession--unsaved (eq (plist-get result :hasUnsavedChanges) t))
     (if docsession--unsaved
         (set-buffer-modified-p t)
       (docsession--mark-clean))
     (docsession--drain)
     (force-mode-line-update)
     (message "docsession: recovered the unsaved changes%s"
              (if (eq (plist-get result :inConflict) t)
                  "; the file changed since: resolve the conflict with \
M-x docsession-resolve-conflict"
                "")))
    (`(error ,code ,message ,_)
     (when (eql code -32025) (setq docsession--recovery nil))
     (docsession--drain)
     (force-mode-line-update)
     (if (eql code -32023)
         (user-error "docsession: the document has unsaved changes of its own; \
save or revert them first, or M-x docsession-discard-recovery")
       (error "docsession: document/recover failed: %s (%s)" message code)))))

(defun docsession-discard-recovery ()
  "Delete the unsaved changes an earlier server left for this file, for good."
  (interactive)
  (unless docsession--document (user-error "Not a docsession buffer"))
  (pcase (docsession--call :document/discardRecovery
                           (list :document docsession--document))
    (`(ok ,_)
     (setq docsession--recovery nil)
     (docsession--drain)
     (force-mode-line-update)
     (message "docsession: discarded the unsaved changes of the earlier session"))
    (`(error ,code ,message ,_)
     (when (eql code -32025) (setq docsession--recovery nil))
     (docsession--drain)
     (force-mode-line-update)
     (error "docsession: document/discardRecovery failed: %s (%s)" message code))))

(defun docsession-recoverable (&optional show)
  "List the unsaved changes of earlier servers that can be recovered.
Interactively (or with SHOW non-nil), show them in the buffer
*docsession recoverable*, newest first, each with a button that visits
its file (enable `docsession-mode' there to be offered the changes).
Return the list of `workspace/recoverable' journals: plists with :uri,
:date, :edits, :version and :open."
  (interactive (list t))
  (let ((journals (append (plist-get (docsession--request :workspace/recoverable nil)
                                     :journals)
                          nil)))
    (when show
      (if (null journals)
          (message "docsession: no unsaved changes to recover")
        (with-current-buffer (get-buffer-create "*docsession recoverable*")
          (let ((inhibit-read-only t))
            (erase-buffer)
            (insert "Unsaved changes of earlier sessions, newest first:\n\n")
            (dolist (journal journals)
              (let ((file (docsession--uri-to-file (plist-get journal :uri))))
                (insert (docsession--format-date (plist-get journal :date))
                        (format "  %3d edit%s  " (plist-get journal :edits)
                                (if (eql (plist-get journal :edits) 1) " " "s")))
                (insert-text-button file 'action (lambda (_) (find-file file))
                                    'help-echo "Visit the file")
                (insert (if (eq (plist-get journal :open) t)
                            "  (open: M-x docsession-recover there)\n"
                          "\n")))))
          (special-mode)
          (goto-char (point-min))
          (display-buffer (current-buffer)))))
    journals))

;;; The mode

(defun docsession--lighter ()
  "Return the mode line text of the document's state."
  (cond ((null docsession--document) " DS?")
        ((member "savingError" docsession--state) " DS!error")
        ((member "inConflict" docsession--state)
         ;; With the file itself, or with sync tools' conflict copies only.
         (if docsession--file-conflict " DS!conflict" " DS!copies"))
        (docsession--deleted " DS!deleted")
        (docsession--out-of-sync " DS!sync")
        (docsession--recovery " DS!recover")
        (docsession--unsaved " DS*")
        (t " DS")))

;;;###autoload
(define-minor-mode docsession-mode
  "Edit the visited file through a docsession server.

Enabling the mode opens the file with the server, and checks that the
server's text is the buffer's: if the buffer was modified, its text is
sent as an edit; if not, the server's text (the file's now) is taken.
Changes are then sent as they happen, saving goes through the server,
and changes that other programs make to the file reach the buffer
when it has no unsaved changes.  The mode line shows the document's
state: DS (saved), DS* (unsaved changes), DS!conflict (the file
changed on disk while the buffer had unsaved changes; see
`docsession-resolve-conflict'), DS!copies (a sync tool left conflict
copies beside the file; see `docsession-resolve-sync-conflict' and
`docsession-show-conflict-copy'), DS!deleted, DS!error (the last save
failed), DS!sync (being resynced).

Disabling the mode closes the document without saving: unsaved
changes stay in the buffer, which Emacs then saves as usual."
  :lighter (:eval (docsession--lighter))
  (if docsession-mode
      (unless docsession--document
        (condition-case err
            (docsession--enable)
          (error
           (docsession--forget)
           (setq docsession-mode nil)
           (signal (car err) (cdr err)))))
    (docsession--disable)))

(put 'docsession-mode 'permanent-local t)

(defun docsession--enable ()
  "Open the visited file through the server and start following the buffer."
  (unless buffer-file-name
    (user-error "docsession-mode needs a buffer visiting a file"))
  (when (save-restriction (widen) (save-excursion
                                    (goto-char (point-min))
                                    (search-forward "\r" nil t)))
    (user-error "The buffer holds a carriage return (mixed line breaks?), \
which the server counts as a line break; docsession-mode refuses it"))
  (let* ((info (docsession--request
                :document/open
                (list :uri (docsession--file-to-uri buffer-file-name))))
         (handle (plist-get info :document))
         (other (gethash handle docsession--buffers)))
    (when (and (buffer-live-p other) (not (eq other (current-buffer))))
      (user-error "The file is already open in buffer %s" (buffer-name other)))
    (setq docsession--document handle
          docsession--version (plist-get info :version)
          docsession--state (append (plist-get info :state) nil)
          docsession--unsaved (eq (plist-get info :hasUnsavedChanges) t)
          docsession--deleted nil
          docsession--out-of-sync nil
          docsession--change nil
          docsession--file-conflict nil
          docsession--sync-copies nil
          docsession--sync-refresh-pending nil
          docsession--eol
          (pcase (plist-get info :lineEnding)
            ("crlf" "\r\n")
            ("cr" "\r")
            ("none" (pcase (coding-system-eol-type buffer-file-coding-system)
                      (1 "\r\n") (2 "\r") (_ "\n")))
            (_ "\n")))
    (puthash handle (current-buffer) docsession--buffers)
    (setq docsession--recovery (plist-get info :recovery)
          docsession--edited-elsewhere (eq (plist-get info :editedElsewhere) t))
    (unless (equal (docsession--inbound (plist-get info :text))
                   (docsession--whole-text))
      (if (buffer-modified-p)
          (docsession--push-buffer)
        (docsession--replace-text (plist-get info :text))
        (docsession--mark-clean)
        (message "docsession: the file changed on disk; took its text")))
    ;; The server watches the file and reports changes on disk: Emacs'
    ;; own check (the visited file's modification time) would ask "changed
    ;; on disk; really edit the buffer?" in the window between another
    ;; program's write and the server's notification.  An unknown time
    ;; turns that check off while the mode is on.
    (clear-visited-file-modtime)
    (add-hook 'before-change-functions #'docsession--before-change nil t)
    (add-hook 'after-change-functions #'docsession--after-change nil t)
    (add-hook 'write-contents-functions #'docsession--write-contents nil t)
    (add-hook 'kill-buffer-hook #'docsession--close nil t)
    (when docsession--edited-elsewhere
      (display-warning
       'docsession
       (format "%s has unsaved changes in another docsession server that is \
running; changes made here and there will conflict"
               (file-name-nondirectory buffer-file-name))))
    (when docsession--recovery
      (condition-case err
          (docsession--offer-recovery)
        (error (message "docsession: recovery failed: %s"
                        (error-message-string err)))))
    ;; A document opens in conflict when sync tools' conflict copies lie
    ;; beside its file: list them now (this is no process filter).
    (when (member "inConflict" docsession--state)
      (condition-case err
          (docsession--refresh-sync-copies)
        (error (message "docsession: listing the conflict copies failed: %s"
                        (error-message-string err)))))
    (force-mode-line-update)))

(dolist (fn '(docsession--before-change docsession--after-change
              docsession--write-contents docsession--close))
  (put fn 'permanent-local-hook t))

(defun docsession--forget ()
  "Forget the buffer's document, without telling the server."
  (when docsession--document
    (when (eq (gethash docsession--document docsession--buffers)
              (current-buffer))
      (remhash docsession--document docsession--buffers)))
  (remove-hook 'before-change-functions #'docsession--before-change t)
  (remove-hook 'after-change-functions #'docsession--after-change t)
  (remove-hook 'write-contents-functions #'docsession--write-contents t)
  (remove-hook 'kill-buffer-hook #'docsession--close t)
  (setq docsession--document nil
        docsession--version nil
        docsession--state nil
        docsession--unsaved nil
        docsession--deleted nil
        docsession--out-of-sync nil
        docsession--change nil
        docsession--recovery nil
        docsession--edited-elsewhere nil
        docsession--file-conflict nil
        docsession--sync-copies nil
        docsession--sync-refresh-pending nil))

(defun docsession--close ()
  "Close the buffer's document without saving, and forget it."
  (let ((handle docsession--document))
    (docsession--forget)
    (when (and handle docsession--connection
               (jsonrpc-running-p docsession--connection))
      (pcase (docsession--call :document/close
                               (list :document handle :save "never"))
        (`(error ,_ ,message ,_)
         (message "docsession: closing %s failed: %s" handle message)))
      (docsession--drain))))

(defun docsession--disable ()
  "Close the document and stop following the buffer."
  (docsession--close)
  ;; Emacs owns the file again: a buffer without unsaved changes holds
  ;; the file's text, so its time is the file's now.  (A modified buffer
  ;; keeps an unknown time: Emacs will not warn that the file changed.)
  (when (and buffer-file-name (file-exists-p buffer-file-name)
             (not (buffer-modified-p)))
    (set-visited-file-modtime))
  (force-mode-line-update))

(provide 'docsession)
;;; docsession.el ends here
